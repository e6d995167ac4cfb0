package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
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

// countingHandler wraps a handler and counts its SyncVA calls.
type countingHandler struct {
	Handler
	mu    sync.Mutex
	syncs int
}

func (c *countingHandler) SyncVA(ctx context.Context, va *storagev1.VolumeAttachment) (time.Duration, error) {
	c.mu.Lock()
	c.syncs++
	c.mu.Unlock()
	return c.Handler.SyncVA(ctx, va)
}

// The controller with the CSI handler over a fake clientset: a new VolumeAttachment is attached with one
// ControllerPublish and two writes even though every write comes back as an informer event.
func TestControllerAttachesOnce(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	va := testutil.VA("va1", "pv1", "node1")
	client := sharedtestutil.NewClientset(va, testutil.PV("pv1", "vol-1"), testutil.CSINode("node1", "i-1"))
	factory := informers.NewSharedInformerFactory(client, 0)
	csiFake := &testutil.FakeCSI{PublishContext: map[string]string{"k": "v"}}
	h := &countingHandler{Handler: handler.NewCSI(handler.Config{
		Driver:        testutil.Driver,
		Client:        client,
		PVLister:      factory.Core().V1().PersistentVolumes().Lister(),
		CSINodeLister: factory.Storage().V1().CSINodes().Lister(),
		VALister:      factory.Storage().V1().VolumeAttachments().Lister(),
		CSI:           csiFake,
	})}
	qm, err := workqueue.NewMetrics(metrics.NewRegistry().Registerer())
	if err != nil {
		t.Fatal(err)
	}
	vaQ, _ := workqueue.New[string](qm, workqueue.Config{Name: "va", RetryIntervalStart: 10 * time.Millisecond, RetryIntervalMax: time.Second})
	pvQ, _ := workqueue.New[string](qm, workqueue.Config{Name: "pv", RetryIntervalStart: 10 * time.Millisecond, RetryIntervalMax: time.Second})
	ctrl, err := New(Config{
		Driver: testutil.Driver, Finalizer: handler.FinalizerName(testutil.Driver), Handler: h,
		VAInformer: factory.Storage().V1().VolumeAttachments(), PVInformer: factory.Core().V1().PersistentVolumes(),
		VAQueue: vaQ, PVQueue: pvQ, Workers: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Storage().V1().CSINodes().Informer()
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})

	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := client.StorageV1().VolumeAttachments().Get(ctx, "va1", metav1.GetOptions{})
		return err == nil && got.Status.Attached, nil
	})
	if err != nil {
		t.Fatalf("VolumeAttachment never attached: %v", err)
	}
	// Let the informer deliver the events of both writes and the workers drain.
	time.Sleep(500 * time.Millisecond)
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
