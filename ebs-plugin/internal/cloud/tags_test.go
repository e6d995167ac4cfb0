package cloud

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"testing"
)

// sentTags reads the TagSpecification.1.Tag.N list of a request's form.
func sentTags(f url.Values) map[string]string {
	out := map[string]string{}
	for i := 1; f.Has(fmt.Sprintf("TagSpecification.1.Tag.%d.Key", i)); i++ {
		out[f.Get(fmt.Sprintf("TagSpecification.1.Tag.%d.Key", i))] = f.Get(fmt.Sprintf("TagSpecification.1.Tag.%d.Value", i))
	}
	return out
}

// The cloud layer sends the tags the driver layered (--extra-tags, class tags) to EC2 exactly as given,
// template-like values included: nothing below the driver renders them. Only the name tag is its own, set over
// whatever the caller passed, because the volume or snapshot is found again by it.
func TestTagsReachEC2AsGiven(t *testing.T) {
	given := map[string]string{"owner": "{{ .PVCName }}", "KubernetesCluster": "mine", "CSIVolumeName": "other", "CSIVolumeSnapshotName": "other"}
	c, h, _ := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
		"CreateVolume": func(url.Values) (string, string, string) {
			return "<volumeId>vol-1</volumeId><size>1</size><status>creating</status>", "", ""
		},
		"DescribeVolumes": describeFrom(map[string]string{"vol-1": volumeXML("vol-1", "available", 1, "")}),
		"CreateSnapshot": func(url.Values) (string, string, string) {
			return "<snapshotId>snap-1</snapshotId><volumeId>vol-1</volumeId><volumeSize>1</volumeSize><status>pending</status>", "", ""
		},
	})
	ctx := context.Background()
	if _, err := c.CreateDisk(ctx, "pvc-a", DiskOptions{CapacityBytes: 1 << 30, VolumeType: "gp3", AvailabilityZone: "us-east-1a", Tags: given}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSnapshot(ctx, "snapshot-a", "vol-1", SnapshotOptions{Tags: given}); err != nil {
		t.Fatal(err)
	}
	wantVol := maps.Clone(given)
	wantVol["CSIVolumeName"] = "pvc-a"
	if got := sentTags(h.call("CreateVolume", 0)); !maps.Equal(got, wantVol) {
		t.Errorf("CreateVolume tags %v, want %v", got, wantVol)
	}
	wantSnap := maps.Clone(given)
	wantSnap["CSIVolumeSnapshotName"] = "snapshot-a"
	if got := sentTags(h.call("CreateSnapshot", 0)); !maps.Equal(got, wantSnap) {
		t.Errorf("CreateSnapshot tags %v, want %v", got, wantSnap)
	}
}
