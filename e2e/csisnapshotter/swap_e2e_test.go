//go:build e2e

package csisnapshotter

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/e2e/csimock"
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
	var creates atomic.Int32
	started := make(chan struct{})
	made := make(chan string, 1)
	drv.SetBeforeCall(func(ctx context.Context, method string, req any) error {
		if method != csimock.CreateSnapshot || creates.Add(1) != 1 {
			return nil
		}
		close(started)
		<-ctx.Done() // the caller is killed
		id, err := createInDriver(drv, req.(*csi.CreateSnapshotRequest))
		if err != nil {
			return status.Errorf(codes.Internal, "taking the snapshot after the caller died: %v", err)
		}
		made <- id
		return ctx.Err()
	})

	stowage := r.startSnapshotter(t, "snapshotter-swap-stowage", drv.Endpoint())
	c := f.createContent(newContent("swap", drv.Name(), "swap", vol.ID, snapv1.VolumeSnapshotContentDelete))
	select {
	case <-started:
	case <-f.ctx.Done():
		t.Fatal("CreateSnapshot was never called")
	}
	stowage.Signal(syscall.SIGKILL)
	<-stowage.Done()
	var id string
	select {
	case id = <-made:
	case <-f.ctx.Done():
		t.Fatal("the driver never finished the snapshot")
	}

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
