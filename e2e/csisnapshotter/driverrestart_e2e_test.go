//go:build e2e

package csisnapshotter

import (
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// TestE2ECSISnapshotterDriverRestart kills the CSI driver under csi-snapshotter while its CreateSnapshot is in
// flight and serves it again on the same socket: csi-snapshotter, which retries failures only after an hour
// here, takes the snapshot on the restarted driver as soon as it is back, since it follows the driver's restart
// (csiconn.FollowRestarts) and retries the work the restart interrupted. The content becomes ready with the
// one snapshot the driver holds, and the sidecar keeps running.
func TestE2ECSISnapshotterDriverRestart(t *testing.T) {
	r := startRig(t)
	f := newFixture(t, r, 5*time.Minute)
	d := e2erig.StartRestartingDriver(t, f.ctx, csimock.Options{Name: "restart.csi.stowage.io",
		ControllerCaps: []csi.ControllerServiceCapability_RPC_Type{
			csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
			csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		}})
	name := d.Driver.Name()
	f.createClass(newClass("restart", name))
	vol := d.Driver.AddVolume("pv-restart", 1<<30)
	d.Hold(csimock.CreateSnapshot)
	sidecar := r.startSnapshotter(t, "snapshotter-restart", d.Endpoint(), e2erig.HourBackoff...)
	c := f.createContent(newContent("restart", name, "restart", vol.ID, snapv1.VolumeSnapshotContentDelete))

	second, back := d.KillDuring(t, csimock.CreateSnapshot, vol)
	got := f.waitReady(c.Name)
	t.Logf("ready %.2fs after the driver was back (backoff 1h); CreateSnapshot calls on the restarted driver: %d",
		time.Since(back).Seconds(), second.Calls(csimock.CreateSnapshot))
	snaps := second.Snapshots()
	if len(snaps) != 1 {
		t.Fatalf("the restarted driver's snapshots = %+v, want exactly one", snaps)
	}
	if s := snaps[0]; s.ID != *got.Status.SnapshotHandle || s.Name != snapshotName(c) || s.SourceVolumeID != vol.ID {
		t.Errorf("snapshot %+v, want %s named %s of %s, the content's", s, *got.Status.SnapshotHandle, snapshotName(c), vol.ID)
	}
	e2erig.CheckFollowed(t, sidecar)
}
