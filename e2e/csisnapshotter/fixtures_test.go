//go:build e2e

package csisnapshotter

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// The snapshot objects of the tests, and what the snapshot controller would do to them, done by hand.
// These strings are upstream's (external-snapshotter pkg/utils), on purpose not taken from Stowage's code.
const (
	boundFinalizer  = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
	annBeingCreated = "snapshot.storage.kubernetes.io/volumesnapshot-being-created"
	annBeingDeleted = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"
)

// newClass is a VolumeSnapshotClass of driver with one driver parameter.
func newClass(name, driver string) *snapv1.VolumeSnapshotClass {
	return &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: driver,
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete, Parameters: map[string]string{"tier": "standard"}}
}

// newContent is a dynamic VolumeSnapshotContent of volume handle vol, as the snapshot controller creates it for
// the VolumeSnapshot default/<name> with a fresh UID: bound, with the bound-protection finalizer.
func newContent(name, driver, class, vol string, policy snapv1.DeletionPolicy) *snapv1.VolumeSnapshotContent {
	return &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{boundFinalizer}},
		Spec: snapv1.VolumeSnapshotContentSpec{
			Driver:                  driver,
			DeletionPolicy:          policy,
			VolumeSnapshotClassName: &class,
			Source:                  snapv1.VolumeSnapshotContentSource{VolumeHandle: &vol},
			VolumeSnapshotRef: corev1.ObjectReference{Kind: "VolumeSnapshot", APIVersion: "snapshot.storage.k8s.io/v1",
				Namespace: "default", Name: name, UID: uuid.NewUUID()},
		},
	}
}

// fixture creates objects for one test and waits for what csi-snapshotter does to them.
type fixture struct {
	t   *testing.T
	ctx context.Context
	r   rig
}

func (f fixture) createClass(c *snapv1.VolumeSnapshotClass) {
	f.t.Helper()
	if _, err := f.r.Snap.SnapshotV1().VolumeSnapshotClasses().Create(f.ctx, c, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("create volumesnapshotclass %s: %v", c.Name, err)
	}
}

func (f fixture) createContent(c *snapv1.VolumeSnapshotContent) *snapv1.VolumeSnapshotContent {
	f.t.Helper()
	out, err := f.r.Snap.SnapshotV1().VolumeSnapshotContents().Create(f.ctx, c, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatalf("create volumesnapshotcontent %s: %v", c.Name, err)
	}
	return out
}

func (f fixture) get(name string) (*snapv1.VolumeSnapshotContent, error) {
	return f.r.Snap.SnapshotV1().VolumeSnapshotContents().Get(f.ctx, name, metav1.GetOptions{})
}

// waitContent waits until cond holds for the content name and returns it.
func (f fixture) waitContent(name, what string, cond func(*snapv1.VolumeSnapshotContent) bool) *snapv1.VolumeSnapshotContent {
	f.t.Helper()
	var out *snapv1.VolumeSnapshotContent
	e2erig.Eventually(f.t, f.ctx, waitTimeout, "volumesnapshotcontent "+name+" "+what, func(context.Context) (bool, error) {
		c, err := f.get(name)
		if err != nil {
			return false, err
		}
		out = c
		return cond(c), nil
	})
	return out
}

// waitReady waits until the content is ready to use and its being-created annotation is gone, which is
// csi-snapshotter's last write of a create.
func (f fixture) waitReady(name string) *snapv1.VolumeSnapshotContent {
	f.t.Helper()
	return f.waitContent(name, "ready, being-created annotation removed", func(c *snapv1.VolumeSnapshotContent) bool {
		_, creating := c.Annotations[annBeingCreated]
		return !creating && c.Status != nil && c.Status.ReadyToUse != nil && *c.Status.ReadyToUse && c.Status.SnapshotHandle != nil
	})
}

// release does what the snapshot controller does when a content's VolumeSnapshot is deleted: annotate the
// content being-deleted, then delete it.
func (f fixture) release(name string) {
	f.t.Helper()
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annBeingDeleted: "yes"}}})
	contents := f.r.Snap.SnapshotV1().VolumeSnapshotContents()
	if _, err := contents.Patch(f.ctx, name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		f.t.Fatalf("annotate volumesnapshotcontent %s being-deleted: %v", name, err)
	}
	if err := contents.Delete(f.ctx, name, metav1.DeleteOptions{}); err != nil {
		f.t.Fatalf("delete volumesnapshotcontent %s: %v", name, err)
	}
}

// waitGone waits until the content no longer exists: csi-snapshotter removed its finalizer.
func (f fixture) waitGone(name string) {
	f.t.Helper()
	e2erig.Eventually(f.t, f.ctx, waitTimeout, "volumesnapshotcontent "+name+" to be gone", func(context.Context) (bool, error) {
		_, err := f.get(name)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// snapshotName is the name csi-snapshotter gives the snapshot of c at the default flags (upstream's).
func snapshotName(c *snapv1.VolumeSnapshotContent) string {
	return "snapshot-" + string(c.Spec.VolumeSnapshotRef.UID)
}

func newFixture(t *testing.T, r rig, timeout time.Duration) fixture {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return fixture{t: t, ctx: ctx, r: r}
}

// midCreate is a CreateSnapshot that outlives its caller: started is closed once the call is in flight, made
// gets the ID of the snapshot the driver took after the caller was gone.
type midCreate struct {
	started chan struct{}
	made    chan string
}

// outliveCaller makes the driver's first CreateSnapshot wait until its caller is gone (killed) and then take
// the snapshot anyway, as a backend finishes work whose caller vanished.
func outliveCaller(drv *csimock.Driver) midCreate {
	m := midCreate{started: make(chan struct{}), made: make(chan string, 1)}
	var creates atomic.Int32
	drv.SetBeforeCall(func(ctx context.Context, method string, req any) error {
		if method != csimock.CreateSnapshot || creates.Add(1) != 1 {
			return nil
		}
		close(m.started)
		<-ctx.Done() // the caller is killed
		id, err := createInDriver(drv, req.(*csi.CreateSnapshotRequest))
		if err != nil {
			return status.Errorf(codes.Internal, "taking the snapshot after the caller died: %v", err)
		}
		m.made <- id
		return ctx.Err()
	})
	return m
}

// waitStarted waits until the CreateSnapshot is in flight.
func (m midCreate) waitStarted(f fixture) {
	f.t.Helper()
	select {
	case <-m.started:
	case <-f.ctx.Done():
		f.t.Fatal("CreateSnapshot was never called")
	}
}

// waitMade waits until the driver took the snapshot and returns its ID.
func (m midCreate) waitMade(f fixture) string {
	f.t.Helper()
	select {
	case id := <-m.made:
		return id
	case <-f.ctx.Done():
		f.t.Fatal("the driver never finished the snapshot")
		return ""
	}
}
