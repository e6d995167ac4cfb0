package controller

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2/ktesting"

	"github.com/stowage-csi/stowage/attacher/internal/handler"
	"github.com/stowage-csi/stowage/attacher/internal/testutil"
	"github.com/stowage-csi/stowage/shared/metrics"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

func TestShouldEnqueue(t *testing.T) {
	base := testutil.VA("va1", "pv1", "node1")
	base.ResourceVersion = "10"
	change := func(f func(*storagev1.VolumeAttachment)) *storagev1.VolumeAttachment {
		va := base.DeepCopy()
		va.ResourceVersion = "11"
		f(va)
		return va
	}
	tests := []struct {
		name string
		new  *storagev1.VolumeAttachment
		want bool
	}{
		{name: "resync with the same resourceVersion", new: base.DeepCopy(), want: true},
		{name: "only attachError changed", new: change(func(va *storagev1.VolumeAttachment) {
			va.Status.AttachError = &storagev1.VolumeError{Message: "boom"}
		}), want: false},
		{name: "only detachError and managedFields changed", new: change(func(va *storagev1.VolumeAttachment) {
			va.Status.DetachError = &storagev1.VolumeError{Message: "boom"}
			va.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "csi-attacher"}}
		}), want: false},
		{name: "deletion requested", new: change(func(va *storagev1.VolumeAttachment) {
			ts := metav1.Now()
			va.DeletionTimestamp = &ts
		}), want: true},
		{name: "status attached changed", new: change(func(va *storagev1.VolumeAttachment) { va.Status.Attached = true }), want: true},
		{name: "annotation changed", new: change(func(va *storagev1.VolumeAttachment) {
			va.Annotations = map[string]string{"a": "b"}
		}), want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := shouldEnqueue(base, tc.new); got != tc.want {
				t.Errorf("shouldEnqueue = %v, want %v", got, tc.want)
			}
		})
	}
}

// syncsHandler wraps a handler and records the resourceVersion of every VolumeAttachment whose SyncVA returned.
type syncsHandler struct {
	Handler
	mu     sync.Mutex
	synced map[string]bool // "name@resourceVersion"
}

func (h *syncsHandler) SyncVA(ctx context.Context, va *storagev1.VolumeAttachment) (time.Duration, error) {
	again, err := h.Handler.SyncVA(ctx, va)
	h.mu.Lock()
	h.synced[va.Name+"@"+va.ResourceVersion] = true
	h.mu.Unlock()
	return again, err
}

func (h *syncsHandler) hasSynced(name, resourceVersion string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.synced[name+"@"+resourceVersion]
}

// startController runs a Controller over the informers of factory with h until the test ends; the channel is
// closed when Run has returned, with its result in *err.
func startController(t *testing.T, ctx context.Context, factory informers.SharedInformerFactory, h Handler, reconcileSync time.Duration, configure func(*Controller)) (<-chan struct{}, *error) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	qm, err := workqueue.NewMetrics(metrics.NewRegistry().Registerer())
	if err != nil {
		t.Fatal(err)
	}
	queue := func(name string) workqueue.Queue[string] {
		q, err := workqueue.New[string](qm, workqueue.Config{Name: name, RetryIntervalStart: 10 * time.Millisecond, RetryIntervalMax: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	ctrl, err := New(Config{
		Driver: testutil.Driver, Finalizer: handler.FinalizerName(testutil.Driver), Handler: h,
		VAInformer: factory.Storage().V1().VolumeAttachments(), PVInformer: factory.Core().V1().PersistentVolumes(),
		VAQueue: queue("va"), PVQueue: queue("pv"), Workers: 2, ReconcileSync: reconcileSync,
	})
	if err != nil {
		t.Fatal(err)
	}
	if configure != nil {
		configure(ctrl)
	}
	factory.Start(ctx.Done())
	stopped := make(chan struct{})
	var runErr error
	go func() { runErr = ctrl.Run(ctx); close(stopped) }()
	t.Cleanup(func() {
		cancel()
		<-stopped
		factory.Shutdown()
	})
	return stopped, &runErr
}

// The controller with the CSI handler over a fake clientset: a new VolumeAttachment is attached with one
// ControllerPublish and two writes even though every write comes back as an informer event.
func TestControllerAttachesOnce(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	va := testutil.VA("va1", "pv1", "node1")
	client := sharedtestutil.NewClientset(va, testutil.PV("pv1", "vol-1"), testutil.CSINode("node1", "i-1"))
	factory := informers.NewSharedInformerFactory(client, 0)
	csiFake := &testutil.FakeCSI{PublishContext: map[string]string{"k": "v"}}
	h := &syncsHandler{synced: map[string]bool{}, Handler: handler.NewCSI(handler.Config{
		Driver:        testutil.Driver,
		Client:        client,
		PVLister:      factory.Core().V1().PersistentVolumes().Lister(),
		CSINodeLister: factory.Storage().V1().CSINodes().Lister(),
		VALister:      factory.Storage().V1().VolumeAttachments().Lister(),
		CSI:           csiFake,
	})}
	factory.Storage().V1().CSINodes().Informer()
	startController(t, ctx, factory, h, 0, nil)

	// Done when a sync has seen the VolumeAttachment as the API server has it now, attached: the events of all
	// earlier writes were delivered before that one, and syncs of one key never overlap, so every sync that could
	// have written again has returned. An extra write would move the resourceVersion on and be counted below.
	sharedtestutil.Eventually(t, 10*time.Second, "a sync of the attached VolumeAttachment", func() (bool, error) {
		got, err := client.StorageV1().VolumeAttachments().Get(ctx, "va1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.Attached && h.hasSynced("va1", got.ResourceVersion), nil
	})
	patches := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			patches++
		}
	}
	publishes := csiFake.PublishCount()
	if publishes != 1 || patches != 2 {
		t.Errorf("publishes = %d, patches = %d; want 1 and 2 (actions %q)", publishes, patches, testutil.Actions(client))
	}
}

// reconcileHandler is a Handler whose only work is the periodic Reconcile.
type reconcileHandler struct {
	reconcile func(context.Context) ([]string, error)
}

func (reconcileHandler) SyncVA(context.Context, *storagev1.VolumeAttachment) (time.Duration, error) {
	return 0, nil
}
func (reconcileHandler) SyncPV(context.Context, *v1.PersistentVolume) error { return nil }
func (h reconcileHandler) Reconcile(ctx context.Context) ([]string, error)  { return h.reconcile(ctx) }
func (reconcileHandler) Forget(string, types.UID)                           {}

// A ListVolumes reconcile still running when the controller is stopped is waited for: Run's return is what lets
// the elector release the lease, and a reconcile outliving it would queue work and call the driver next to the
// new leader's. The reconcile is held until Run starts waiting for it (the joining hook), so a Run that returns
// without waiting returns while it is provably still in flight.
func TestRunWaitsForTheReconcile(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	entered, release := make(chan struct{}), make(chan struct{})
	var enterOnce, releaseOnce sync.Once
	releaseReconcile := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseReconcile)
	var inFlight atomic.Bool
	h := reconcileHandler{reconcile: func(ctx context.Context) ([]string, error) {
		inFlight.Store(true)
		defer inFlight.Store(false)
		enterOnce.Do(func() { close(entered) })
		<-ctx.Done()
		<-release
		return []string{"va-found-by-the-reconcile"}, nil
	}}
	client := sharedtestutil.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	stopped, runErr := startController(t, ctx, factory, h, time.Hour, func(c *Controller) { c.joining = releaseReconcile })

	<-entered
	cancel()
	select {
	case <-stopped:
		if *runErr != nil {
			t.Fatalf("Run() = %v", *runErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if inFlight.Load() {
		t.Fatal("Run returned while the ListVolumes reconcile was still running")
	}
}
