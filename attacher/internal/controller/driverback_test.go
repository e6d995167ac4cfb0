package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2/ktesting"

	"github.com/stowage-csi/stowage/attacher/internal/handler"
	"github.com/stowage-csi/stowage/attacher/internal/testutil"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
	"github.com/stowage-csi/stowage/shared/workqueue/queuetest"
)

// downHandler fails every sync while the driver is down, and counts the syncs of each VolumeAttachment.
type downHandler struct {
	reconcileHandler
	mu    sync.Mutex
	down  bool
	syncs map[string]int
	ok    map[string]int
}

func (h *downHandler) SyncVA(_ context.Context, va *storagev1.VolumeAttachment) (time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.syncs[va.Name]++
	if h.down {
		return 0, errors.New("rpc error: code = Unavailable desc = connection refused")
	}
	h.ok[va.Name]++
	return 0, nil
}

func (h *downHandler) counts(name string) (syncs, ok int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.syncs[name], h.ok[name]
}

// A VolumeAttachment whose sync failed while the driver was away waits an hour of backoff here; DriverBack, the
// driver's return, retries it at once.
func TestDriverBackRetriesFailedVolumeAttachments(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := sharedtestutil.NewClientset(testutil.VA("va1", "pv1", "node1"))
	factory := informers.NewSharedInformerFactory(client, 0)
	queue := queuetest.SlowRetry(t)
	h := &downHandler{down: true, syncs: map[string]int{}, ok: map[string]int{}}
	ctrl, err := New(Config{
		Driver: testutil.Driver, Finalizer: handler.FinalizerName(testutil.Driver), Handler: h,
		VAInformer: factory.Storage().V1().VolumeAttachments(), PVInformer: factory.Core().V1().PersistentVolumes(),
		VAQueue: queue("va"), PVQueue: queue("pv"), Workers: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	queuetest.RunController(t, ctx, factory, ctrl.Run)

	sharedtestutil.Eventually(t, 10*time.Second, "a failed sync while the driver is down", func() (bool, error) {
		syncs, _ := h.counts("va1")
		return syncs == 1, nil
	})
	h.mu.Lock()
	h.down = false
	h.mu.Unlock()
	ctrl.DriverBack(ctx)
	sharedtestutil.Eventually(t, 10*time.Second, "a successful sync after the driver came back", func() (bool, error) {
		_, ok := h.counts("va1")
		return ok == 1, nil
	})
}
