//go:build e2e

package csisnapshotter

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// TestE2ECSISnapshotter runs csi-snapshotter against one real control plane: create and delete with the API
// writes counted, a content released while its CreateSnapshot is in flight, kill -9 in the middle of a
// CreateSnapshot, group snapshots, and --node-deployment. Each part has a driver of its own, so a sidecar left from one part cannot act in another.
func TestE2ECSISnapshotter(t *testing.T) {
	r := startRig(t)
	t.Run("CreateReadyDeleteRetain", func(t *testing.T) { testCreateDelete(t, r) })
	t.Run("ReleasedWhileCreatingLeavesNoSnapshot", func(t *testing.T) { testReleasedWhileCreating(t, r) })
	t.Run("KillMidCreateThenRestart", func(t *testing.T) { testKillMidCreate(t, r) })
	t.Run("FailureInStatusAndEvent", func(t *testing.T) { testFailure(t, r) })
	t.Run("GroupSnapshots", func(t *testing.T) { testGroups(t, r) })
	t.Run("NodeDeployment", func(t *testing.T) { testNodeDeployment(t, r) })
}

// testCreateDelete takes two snapshots, deletes the one with policy Delete and keeps the one with policy
// Retain, under exactly upstream's manifest arguments, and checks every write csi-snapshotter made.
func testCreateDelete(t *testing.T, r rig) {
	f := newFixture(t, r, 5*time.Minute)
	drv := startDriver(t, "create.csi.stowage.io")
	f.createClass(newClass("create", drv.Name()))
	vol := drv.AddVolume("pv-create", 1<<30)
	r.startSnapshotter(t, "snapshotter-create", drv.Endpoint())

	del := f.createContent(newContent("create-delete", drv.Name(), "create", vol.ID, snapv1.VolumeSnapshotContentDelete))
	ret := f.createContent(newContent("create-retain", drv.Name(), "create", vol.ID, snapv1.VolumeSnapshotContentRetain))
	byName := map[string]string{}
	for _, c := range []*snapv1.VolumeSnapshotContent{del, ret} {
		got := f.waitReady(c.Name)
		if got.Status.RestoreSize == nil || *got.Status.RestoreSize != 1<<30 || got.Status.CreationTime == nil {
			t.Errorf("%s status = %+v, want restoreSize 1Gi and a creation time", c.Name, got.Status)
		}
		byName[snapshotName(c)] = *got.Status.SnapshotHandle
	}
	for _, s := range drv.Snapshots() {
		if byName[s.Name] != s.ID || s.SourceVolumeID != vol.ID {
			t.Errorf("driver snapshot %+v: not the one a content records (%v) under upstream's name", s, byName)
		}
	}
	if n := len(drv.Snapshots()); n != 2 {
		t.Fatalf("driver holds %d snapshots, want 2", n)
	}

	f.release(del.Name)
	f.waitGone(del.Name)
	f.release(ret.Name)
	f.waitGone(ret.Name)
	snaps := drv.Snapshots()
	if len(snaps) != 1 || snaps[0].Name != snapshotName(ret) {
		t.Errorf("driver snapshots after deletion = %+v, want only the retained %s", snaps, snapshotName(ret))
	}
	if n := drv.Calls(csimock.DeleteSnapshot); n != 1 {
		t.Errorf("DeleteSnapshot called %d times, want 1", n)
	}

	// Per content: the being-created annotation, the status, the annotation's removal, and at deletion the
	// finalizer's removal; all patches, no Update (upstream: a GET before the status write, and a status
	// write of its own when deleting).
	for _, c := range []*snapv1.VolumeSnapshotContent{del, ret} {
		want := []string{
			"patch volumesnapshotcontents " + c.Name + " 200 " + snapshotterUser,
			"patch volumesnapshotcontents/status " + c.Name + " 200 " + snapshotterUser,
			"patch volumesnapshotcontents " + c.Name + " 200 " + snapshotterUser,
			"patch volumesnapshotcontents " + c.Name + " 200 " + snapshotterUser,
		}
		var got []string
		// The audit event of the last write may land just after the object is gone; wait for it.
		e2erig.Eventually(t, f.ctx, waitTimeout, "csi-snapshotter's writes to "+c.Name, func(context.Context) (bool, error) {
			got = r.contentWrites(t, c.Name)
			return len(got) >= len(want), nil
		})
		if !slices.Equal(got, want) {
			t.Errorf("writes to %s:\n got  %q\n want %q", c.Name, got, want)
		}
	}

	lease, err := r.Client.CoordinationV1().Leases(sidecarrig.Namespace).Get(f.ctx, "external-snapshotter-leader-create-csi-stowage-io", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("lease external-snapshotter-leader-create-csi-stowage-io = %v (%v), want one with a holder", lease, err)
	}
}

// testReleasedWhileCreating makes the driver take the snapshot but lose the answer (a timeout, from
// csi-snapshotter's side) while the content is released and deleted: csi-snapshotter must learn the
// snapshot's ID by asking again under the same name, and delete it.
func testReleasedWhileCreating(t *testing.T, r rig) {
	f := newFixture(t, r, 5*time.Minute)
	drv := startDriver(t, "inflight.csi.stowage.io")
	f.createClass(newClass("inflight", drv.Name()))
	vol := drv.AddVolume("pv-inflight", 1<<30)
	var creates atomic.Int32
	mid := midCreate{started: make(chan struct{}), made: make(chan string, 1)}
	release := make(chan struct{})
	drv.SetBeforeCall(func(ctx context.Context, method string, req any) error {
		if method != csimock.CreateSnapshot || creates.Add(1) != 1 {
			return nil
		}
		close(mid.started)
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		id, err := createInDriver(drv, req.(*csi.CreateSnapshotRequest))
		if err != nil {
			return status.Errorf(codes.Internal, "taking the snapshot behind the sidecar's back: %v", err)
		}
		mid.made <- id
		return status.Error(codes.DeadlineExceeded, "injected: the driver took the snapshot, the answer was lost")
	})
	r.startSnapshotter(t, "snapshotter-inflight", drv.Endpoint())

	c := f.createContent(newContent("inflight", drv.Name(), "inflight", vol.ID, snapv1.VolumeSnapshotContentDelete))
	mid.waitStarted(f)
	if got, err := f.get(c.Name); err != nil || got.Annotations[annBeingCreated] != "yes" {
		t.Fatalf("during CreateSnapshot: content %v (%v), want the being-created annotation set before the call", got, err)
	}
	f.release(c.Name)
	close(release)
	id := mid.waitMade(f)
	f.waitGone(c.Name)
	if snaps := drv.Snapshots(); len(snaps) != 0 {
		t.Errorf("driver snapshots = %+v, want none: %s leaked", snaps, id)
	}
	if n := drv.Calls(csimock.DeleteSnapshot); n < 1 {
		t.Errorf("DeleteSnapshot called %d times, want at least 1", n)
	}
}

// testKillMidCreate kills csi-snapshotter with SIGKILL while its CreateSnapshot is in flight, lets the driver
// finish the snapshot after the caller is gone, and starts a new csi-snapshotter: it must find the
// being-created annotation and record the same snapshot (not take a second one), which is then deleted.
func testKillMidCreate(t *testing.T, r rig) {
	f := newFixture(t, r, 5*time.Minute)
	drv := startDriver(t, "kill.csi.stowage.io")
	f.createClass(newClass("kill", drv.Name()))
	vol := drv.AddVolume("pv-kill", 1<<30)
	mid := outliveCaller(drv)
	endpoint := e2erig.FreeAddr(t)
	first := r.startSnapshotter(t, "snapshotter-kill-1", drv.Endpoint(), "--http-endpoint="+endpoint)

	c := f.createContent(newContent("kill", drv.Name(), "kill", vol.ID, snapv1.VolumeSnapshotContentDelete))
	mid.waitStarted(f)
	if got, err := f.get(c.Name); err != nil || got.Annotations[annBeingCreated] != "yes" {
		t.Fatalf("during CreateSnapshot: content %v (%v), want the being-created annotation set before the call", got, err)
	}
	if code, body := e2erig.Get(t, f.ctx, "http://"+endpoint+"/healthz/leader-election"); code != http.StatusOK {
		t.Errorf("/healthz/leader-election = %d %q, want 200", code, body)
	}
	_, metrics := e2erig.Get(t, f.ctx, "http://"+endpoint+"/metrics")
	for _, want := range []string{`workqueue_adds_total{name="csi-snapshotter-content"}`, "leader_election_master_status"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	first.Signal(syscall.SIGKILL)
	<-first.Done()
	id := mid.waitMade(f)

	second := e2erig.FreeAddr(t)
	r.startSnapshotter(t, "snapshotter-kill-2", drv.Endpoint(), "--http-endpoint="+second)
	got := f.waitReady(c.Name)
	if *got.Status.SnapshotHandle != id {
		t.Errorf("snapshotHandle = %s, want %s, the snapshot the killed sidecar's call made", *got.Status.SnapshotHandle, id)
	}
	if snaps := drv.Snapshots(); len(snaps) != 1 {
		t.Errorf("driver snapshots = %+v, want exactly the one", snaps)
	}
	_, metrics = e2erig.Get(t, f.ctx, "http://"+second+"/metrics")
	if !hasLine(metrics, "csi_sidecar_operations_seconds_count", `driver_name="kill.csi.stowage.io"`, `method_name="/csi.v1.Controller/CreateSnapshot"`) {
		t.Errorf("/metrics lacks csi_sidecar_operations_seconds for CreateSnapshot of kill.csi.stowage.io")
	}
	f.release(c.Name)
	f.waitGone(c.Name)
	if snaps := drv.Snapshots(); len(snaps) != 0 {
		t.Errorf("driver snapshots after deletion = %+v, want none", snaps)
	}
}

// testFailure creates a content whose class does not exist: the error goes to status.error and to a Warning
// Event of upstream's reason on the content (which needs the snapshot types in the Event scheme and the
// events grant of the RBAC), no CreateSnapshot is made, and the released content is let go.
func testFailure(t *testing.T, r rig) {
	f := newFixture(t, r, 5*time.Minute)
	drv := startDriver(t, "fail.csi.stowage.io")
	vol := drv.AddVolume("pv-fail", 1<<30)
	r.startSnapshotter(t, "snapshotter-fail", drv.Endpoint())
	c := f.createContent(newContent("fail", drv.Name(), "no-such-class", vol.ID, snapv1.VolumeSnapshotContentDelete))
	got := f.waitContent(c.Name, "with status.error", func(c *snapv1.VolumeSnapshotContent) bool {
		return c.Status != nil && c.Status.Error != nil && c.Status.Error.Message != nil
	})
	if msg := *got.Status.Error.Message; !strings.Contains(msg, "no-such-class") || got.Status.ReadyToUse == nil || *got.Status.ReadyToUse {
		t.Errorf("status = %q, readyToUse %v; want the missing class named and readyToUse false", msg, got.Status.ReadyToUse)
	}
	e2erig.Eventually(t, f.ctx, waitTimeout, "a SnapshotCreationFailed Event on volumesnapshotcontent fail", func(ctx context.Context) (bool, error) {
		events, err := r.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=fail"})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Reason == "SnapshotCreationFailed" && ev.Type == "Warning" && ev.InvolvedObject.Kind == "VolumeSnapshotContent" &&
				ev.Source.Component == "csi-snapshotter" {
				return true, nil
			}
		}
		return false, nil
	})
	if n := drv.Calls(csimock.CreateSnapshot); n != 0 {
		t.Errorf("CreateSnapshot called %d times without a class, want 0", n)
	}
	f.release(c.Name)
	f.waitGone(c.Name)
}

// createInDriver calls the driver's CreateSnapshot over its socket, as the driver finishing a call on its
// own would, and returns the snapshot's ID.
func createInDriver(drv *csimock.Driver, req *csi.CreateSnapshotRequest) (string, error) {
	conn, err := grpc.NewClient(drv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rsp, err := csi.NewControllerClient(conn).CreateSnapshot(ctx, req)
	if err != nil {
		return "", err
	}
	return rsp.GetSnapshot().GetSnapshotId(), nil
}

// hasLine reports whether a line of text starts with prefix and contains every one of parts.
func hasLine(text, prefix string, parts ...string) bool {
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
