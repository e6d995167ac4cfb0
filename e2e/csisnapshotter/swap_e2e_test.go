//go:build e2e

package csisnapshotter

import (
	"syscall"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// TestE2ECSISnapshotterSwapWithUpstream swaps csi-snapshotter and upstream's (external-snapshotter v8, built
// from e2e/tools) in the middle of one snapshot's life, both ways, under the same Lease, arguments and RBAC:
// Stowage's is killed with CreateSnapshot in flight and upstream's finishes the snapshot from the
// being-created annotation; then upstream's is killed and Stowage's deletes the released content's snapshot.
func TestE2ECSISnapshotterSwapWithUpstream(t *testing.T) {
	// The peer is built (or taken from the cache) before the scenario's clock starts: a first build takes
	// minutes on 2 cores, and ate the scenario's whole 10 minutes on a fresh machine.
	upstream := sidecarrig.Upstream(t, sidecarrig.CSISnapshotter())
	r := startRig(t)
	f := newFixture(t, r, 10*time.Minute)
	drv := startDriver(t, "swap.csi.stowage.io")
	f.createClass(newClass("swap", drv.Name()))
	vol := drv.AddVolume("pv-swap", 1<<30)
	mid := outliveCaller(drv)

	stowage := r.startSnapshotter(t, "snapshotter-swap-stowage", drv.Endpoint())
	c := f.createContent(newContent("swap", drv.Name(), "swap", vol.ID, snapv1.VolumeSnapshotContentDelete))
	mid.waitStarted(f)
	stowage.Signal(syscall.SIGKILL)
	<-stowage.Done()
	id := mid.waitMade(f)

	theirs := r.startBinary(t, upstream, "snapshotter-swap-upstream", drv.Endpoint())
	got := f.waitReady(c.Name)
	if *got.Status.SnapshotHandle != id || len(drv.Snapshots()) != 1 {
		t.Fatalf("upstream recorded %s with the driver holding %+v; want the one snapshot %s Stowage's call made", *got.Status.SnapshotHandle, drv.Snapshots(), id)
	}
	theirs.Signal(syscall.SIGKILL)
	<-theirs.Done()

	r.startSnapshotter(t, "snapshotter-swap-stowage-2", drv.Endpoint())
	f.release(c.Name)
	f.waitGone(c.Name)
	if snaps := drv.Snapshots(); len(snaps) != 0 {
		t.Errorf("driver snapshots after deletion = %+v, want none", snaps)
	}
}
