package driver

import (
	"context"
	"maps"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/cloud"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/metadata"
)

const testOutpostARN = "arn:aws:outposts:us-west-2:111122223333:outpost/op-0123456789abcdef0"

// outpostTopology is what a node on the Outpost publishes (and the provisioner passes on), plus its zone.
func outpostTopology(zone string) map[string]string {
	return map[string]string{ZoneTopologyKey: zone, PartitionTopologyKey: "aws", RegionTopologyKey: "us-west-2",
		AccountIDTopologyKey: "111122223333", OutpostIDTopologyKey: "op-0123456789abcdef0"}
}

func TestOutpostARN(t *testing.T) {
	zoneOnly := &csi.Topology{Segments: map[string]string{ZoneTopologyKey: "us-west-2a"}}
	noAccount := outpostTopology("us-west-2a")
	delete(noAccount, AccountIDTopologyKey)
	other := outpostTopology("us-west-2a")
	other[OutpostIDTopologyKey] = "op-0fffffffffffffff0"
	for _, tc := range []struct {
		name string
		tr   *csi.TopologyRequirement
		want string
		code codes.Code
	}{
		{name: "no requirements"},
		{name: "zones only", tr: &csi.TopologyRequirement{Preferred: []*csi.Topology{zoneOnly}, Requisite: []*csi.Topology{zoneOnly}}},
		{name: "preferred outpost", tr: &csi.TopologyRequirement{Preferred: []*csi.Topology{{Segments: outpostTopology("us-west-2a")}}}, want: testOutpostARN},
		{name: "preferred before requisite", tr: &csi.TopologyRequirement{Preferred: []*csi.Topology{{Segments: outpostTopology("us-west-2a")}},
			Requisite: []*csi.Topology{{Segments: other}}}, want: testOutpostARN},
		{name: "requisite when no preferred names one", tr: &csi.TopologyRequirement{Preferred: []*csi.Topology{zoneOnly},
			Requisite: []*csi.Topology{{Segments: outpostTopology("us-west-2a")}}}, want: testOutpostARN},
		{name: "outpost-id without account-id", tr: &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: noAccount}}}, code: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := outpostARN(tc.tr)
			if tc.code != codes.OK {
				wantCode(t, err, tc.code, AccountIDTopologyKey)
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%q %v, want %q", got, err, tc.want)
			}
		})
	}
}

func TestOutpostSegments(t *testing.T) {
	want := outpostTopology("")
	delete(want, ZoneTopologyKey)
	for _, tc := range []struct {
		arn  string
		want map[string]string
	}{
		{arn: testOutpostARN, want: want},
		{arn: ""},
		{arn: "arn:aws:ec2:us-west-2:111122223333:volume/vol-1"},
		{arn: "arn:aws:outposts:us-west-2:111122223333:site/os-1"},
		{arn: "arn:aws:outposts:us-west-2::outpost/op-1"},
		{arn: "not an arn"},
	} {
		if got := outpostSegments(tc.arn); !maps.Equal(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.arn, got, tc.want)
		}
	}
}

// TestCreateVolumeOnOutpost: a volume for an Outpost node's topology is created with the Outpost's ARN, and
// its accessible topology carries the Outpost's keys, so it is only scheduled onto that Outpost; a clone
// stays where its source is.
func TestCreateVolumeOnOutpost(t *testing.T) {
	d, fc, _ := newTestDriver(t, Options{})
	ctx := context.Background()
	req := &csi.CreateVolumeRequest{Name: "pvc-op", VolumeCapabilities: []*csi.VolumeCapability{mountCap("ext4")},
		Parameters:                map[string]string{"type": "gp2"},
		AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: outpostTopology("us-west-2a")}}}}
	resp, err := d.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := fc.Created[0]; got.OutpostARN != testOutpostARN || got.AvailabilityZone != "us-west-2a" {
		t.Fatalf("CreateDisk options %+v", got)
	}
	seg := resp.GetVolume().GetAccessibleTopology()[0].GetSegments()
	want := outpostTopology("")
	delete(want, ZoneTopologyKey)
	want[WellKnownZoneTopologyKey] = "us-west-2a"
	if !maps.Equal(seg, want) {
		t.Fatalf("accessible topology %v, want %v", seg, want)
	}

	regional := fc.AddVolume(cloud.Disk{AvailabilityZone: "us-west-2a", CapacityGiB: 1, VolumeType: "gp3", State: "available"})
	clone := &csi.CreateVolumeRequest{Name: "pvc-clone", VolumeCapabilities: req.VolumeCapabilities, AccessibilityRequirements: req.AccessibilityRequirements,
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: regional.VolumeID}}}}
	_, err = d.CreateVolume(ctx, clone)
	wantCode(t, err, codes.InvalidArgument, "Outpost")
}

// TestNodeGetInfoOnOutpost: a node whose metadata has an Outpost ARN publishes the Outpost's keys beside its
// zone; one without publishes none of them.
func TestNodeGetInfoOnOutpost(t *testing.T) {
	for _, tc := range []struct {
		arn  string
		want map[string]string
	}{
		{arn: testOutpostARN, want: outpostTopology("us-west-2a")},
		{arn: "", want: map[string]string{ZoneTopologyKey: "us-west-2a"}},
	} {
		d, _, _ := newTestDriver(t, Options{})
		d.metadata = fakeMeta{inst: &metadata.Instance{InstanceID: testNode, InstanceType: "m5.large", AvailabilityZone: "us-west-2a", ENIs: 1, OutpostARN: tc.arn}}
		resp, err := d.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		seg := resp.GetAccessibleTopology().GetSegments()
		for k, v := range tc.want {
			if seg[k] != v {
				t.Errorf("outpost %q: segments %v lack %s=%s", tc.arn, seg, k, v)
			}
		}
		if _, ok := seg[OutpostIDTopologyKey]; ok != (tc.arn != "") {
			t.Errorf("outpost %q: segments %v", tc.arn, seg)
		}
	}
}
