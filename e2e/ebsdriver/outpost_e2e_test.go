//go:build e2e

package ebsdriver

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestE2EEBSOutpostVolumes creates a volume for an Outpost node's topology through ec2sim: EC2 stores the
// Outpost ARN the driver built from the topology keys (read back by DescribeVolumes when the volume is
// cloned, which must stay on its Outpost), and the volume's accessible topology carries the Outpost's keys; a
// regional volume gets none, and cloning it onto the Outpost is refused.
func TestE2EEBSOutpostVolumes(t *testing.T) {
	d := controllerDriver(t, "i-0e0e00000000000c1")
	ctx := testContext(t, 2*time.Minute)
	outpost := map[string]string{
		"topology.ebs.csi.aws.com/zone": testZone, "topology.ebs.csi.aws.com/partition": "aws",
		"topology.ebs.csi.aws.com/region": testRegion, "topology.ebs.csi.aws.com/account-id": "111122223333",
		"topology.ebs.csi.aws.com/outpost-id": "op-0123456789abcdef0",
	}
	onOutpost := &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: outpost}}}
	create := func(name string, tr *csi.TopologyRequirement, src string) (*csi.Volume, error) {
		req := volumeRequest(name, 1, mountCapability(""), map[string]string{"type": "gp2"})
		req.AccessibilityRequirements = tr
		if src != "" {
			req.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: src}}}
		}
		resp, err := d.ctl.CreateVolume(ctx, req)
		if err == nil {
			id := resp.GetVolume().GetVolumeId()
			t.Cleanup(func() { _, _ = d.ctl.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: id}) })
		}
		return resp.GetVolume(), err
	}
	// The volume's topology: the well-known zone key (upstream's only zone key today) and on the Outpost its
	// four keys.
	wantOutpost := func(v *csi.Volume, want bool) {
		t.Helper()
		seg := v.GetAccessibleTopology()[0].GetSegments()
		exp := map[string]string{"topology.kubernetes.io/zone": testZone}
		if want {
			for k, val := range outpost {
				if k != "topology.ebs.csi.aws.com/zone" {
					exp[k] = val
				}
			}
		}
		if !maps.Equal(seg, exp) {
			t.Fatalf("volume %s topology %v, want %v", v.GetVolumeId(), seg, exp)
		}
	}

	vol, err := create("outpost", onOutpost, "")
	if err != nil {
		t.Fatalf("CreateVolume on the Outpost: %v", err)
	}
	wantOutpost(vol, true)
	clone, err := create("outpost-clone", onOutpost, vol.GetVolumeId())
	if err != nil {
		t.Fatalf("clone on the same Outpost (EC2 must have kept the source's OutpostArn): %v", err)
	}
	wantOutpost(clone, true)

	regional, err := create("regional", &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{"topology.ebs.csi.aws.com/zone": testZone}}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	wantOutpost(regional, false)
	if _, err := create("regional-clone", onOutpost, regional.GetVolumeId()); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("clone of a regional volume onto the Outpost: %v, want InvalidArgument", err)
	}
}
