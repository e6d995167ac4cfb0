//go:build e2e

package ebsdriver

import (
	"maps"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

// TestE2EEBSExtraTagsAgainstClassTags: the tags EC2 records for a volume and a snapshot made with --extra-tags
// and --k8s-tag-cluster-id, against class tags of the same keys, follow upstream's order (the driver's own,
// the cluster ID's, --extra-tags, the class's), and --extra-tags values are taken as written: a value that
// reads like a volume template neither renders on the volume nor fails the snapshot, which has no such field.
func TestE2EEBSExtraTagsAgainstClassTags(t *testing.T) {
	const instanceID = "i-0571c00000000007a"
	sim, _ := startSim(t, 0.01, []ec2sim.Instance{{ID: instanceID, Zone: testZone, Type: "m5.large"}})
	p := startPlugin(t, buildPlugin(t), pluginEnv(t, sim, "", true), "controller",
		"--k8s-tag-cluster-id=prod", "--extra-tags=team=storage,tier=flag,KubernetesCluster=mine,owner={{ .PVCName }}")
	d := newDriver(t, sim, p, instanceID)
	ctx := testContext(t, 2*time.Minute)

	id := d.createVolume(ctx, volumeRequest("pvc-tags", 1, mountCapability(""), map[string]string{
		"csi.storage.k8s.io/pvc/name": "data", "csi.storage.k8s.io/pvc/namespace": "db",
		"tagSpecification_1": "tier=class-{{ .PVCNamespace }}",
	}))
	snap, err := d.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snapshot-tags", SourceVolumeId: id, Parameters: map[string]string{
		"csi.storage.k8s.io/volumesnapshot/name": "nightly", "tagSpecification_1": "made-for={{ .VolumeSnapshotName }}",
	}})
	if err != nil {
		t.Fatalf("CreateSnapshot with a template-like --extra-tags value: %v", err)
	}
	t.Cleanup(func() {
		_, _ = d.ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshot().GetSnapshotId()})
	})

	state := sim.State()
	var volTags, snapTags map[string]string
	for _, v := range state.Volumes {
		if v.ID == id {
			volTags = v.Tags
		}
	}
	for _, s := range state.Snapshots {
		if s.ID == snap.GetSnapshot().GetSnapshotId() {
			snapTags = s.Tags
		}
	}
	wantVol := map[string]string{
		"CSIVolumeName": "pvc-tags", "ebs.csi.aws.com/cluster": "true",
		"kubernetes.io/created-for/pvc/name": "data", "kubernetes.io/created-for/pvc/namespace": "db",
		"kubernetes.io/cluster/prod": "owned", "ebs.csi.aws.com/cluster-name": "prod", "Name": "prod-dynamic-pvc-tags",
		"KubernetesCluster": "mine", "team": "storage", "tier": "class-db", "owner": "{{ .PVCName }}",
	}
	if !maps.Equal(volTags, wantVol) {
		t.Errorf("volume tags in EC2\n got %v\nwant %v", volTags, wantVol)
	}
	wantSnap := map[string]string{
		"CSIVolumeSnapshotName": "snapshot-tags", "ebs.csi.aws.com/cluster": "true",
		"kubernetes.io/cluster/prod": "owned", "ebs.csi.aws.com/cluster-name": "prod", "Name": "prod-dynamic-snapshot-tags",
		"KubernetesCluster": "mine", "team": "storage", "tier": "flag", "owner": "{{ .PVCName }}", "made-for": "nightly",
	}
	if !maps.Equal(snapTags, wantSnap) {
		t.Errorf("snapshot tags in EC2\n got %v\nwant %v", snapTags, wantSnap)
	}
}
