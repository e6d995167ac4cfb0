package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2/ktesting"

	"github.com/stowage-csi/stowage/resizer/internal/testutil"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
	"github.com/stowage-csi/stowage/shared/workqueue/queuetest"
)

// downHandler fails every sync while the driver is down, and counts the syncs of each claim, all and
// successful ones.
type downHandler struct {
	mu    sync.Mutex
	down  bool
	syncs map[string]int
	ok    map[string]int
}

func newDownHandler() *downHandler {
	return &downHandler{down: true, syncs: map[string]int{}, ok: map[string]int{}}
}

func (h *downHandler) Sync(_ context.Context, pvc *v1.PersistentVolumeClaim) (time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.syncs[pvc.Name]++
	if h.down {
		return 0, errors.New("rpc error: code = Unavailable desc = connection refused")
	}
	h.ok[pvc.Name]++
	return 0, nil
}

func (h *downHandler) Forget(string, *v1.PersistentVolumeClaim) {}

func (h *downHandler) setDown(down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down = down
}

func (h *downHandler) counts(name string) (syncs, ok int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.syncs[name], h.ok[name]
}

// A claim whose expansion and modification failed while the driver was away waits an hour of backoff in each
// queue here; DriverBack, the driver's return, retries it at once in both, and leaves alone a claim whose
// sync succeeded.
func TestDriverBackRetriesFailedClaims(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := sharedtestutil.NewClientset(testutil.PVC("c1", "pv1", "2Gi", "1Gi"))
	factory := informers.NewSharedInformerFactory(client, 0)
	queue := queuetest.SlowRetry(t)
	expand, modify := newDownHandler(), newDownHandler()
	c, err := New(Config{
		Driver: testutil.Driver, PVCInformer: factory.Core().V1().PersistentVolumeClaims(), PVInformer: factory.Core().V1().PersistentVolumes(),
		Expand: expand, ExpandQueue: queue("expand"), Modify: modify, ModifyQueue: queue("modify"),
		VACInformer: factory.Storage().V1().VolumeAttributesClasses(), Workers: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	queuetest.RunController(t, ctx, factory, c.Run)
	handlers := map[string]*downHandler{"expand": expand, "modify": modify}
	waitFor := func(what, name string, cond func(syncs, ok int) bool) {
		t.Helper()
		for queue, h := range handlers {
			sharedtestutil.Eventually(t, 10*time.Second, queue+" queue, "+name+": "+what, func() (bool, error) {
				return cond(h.counts(name)), nil
			})
		}
	}

	waitFor("a failed sync while the driver is down", "c1", func(syncs, _ int) bool { return syncs == 1 })
	expand.setDown(false)
	modify.setDown(false)
	// c2 arrives once the driver is back and syncs at once: nothing for DriverBack to retry.
	claims := client.CoreV1().PersistentVolumeClaims(testutil.Namespace)
	if _, err := claims.Create(ctx, testutil.PVC("c2", "pv2", "2Gi", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("a successful sync", "c2", func(_, ok int) bool { return ok == 1 })

	c.DriverBack(ctx)
	waitFor("a successful sync after the driver came back", "c1", func(_, ok int) bool { return ok == 1 })
	// One worker per queue takes keys in order: once c3, queued after DriverBack, is synced, a c2 that
	// DriverBack had queued would have been synced again.
	if _, err := claims.Create(ctx, testutil.PVC("c3", "pv3", "2Gi", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("a successful sync", "c3", func(_, ok int) bool { return ok == 1 })
	for queue, h := range handlers {
		if syncs, _ := h.counts("c2"); syncs != 1 {
			t.Errorf("%s: syncs of c2 = %d, want 1 (DriverBack retried a claim that had synced)", queue, syncs)
		}
	}
}
