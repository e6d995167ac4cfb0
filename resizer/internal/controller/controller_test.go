package controller

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/stowage-csi/stowage/resizer/internal/testutil"
	"github.com/stowage-csi/stowage/shared/metrics"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

// recorder is a Handler that records the claims it synced and forgot.
type recorder struct {
	mu      sync.Mutex
	synced  []string
	forgot  []string
	version map[string]string // the resourceVersion of the last synced copy per claim
}

func (r *recorder) Sync(_ context.Context, pvc *v1.PersistentVolumeClaim) (time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.synced = append(r.synced, pvc.Name)
	r.version[pvc.Name] = pvc.ResourceVersion
	return 0, nil
}

func (r *recorder) Forget(key string, _ *v1.PersistentVolumeClaim) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgot = append(r.forgot, key)
}

func (r *recorder) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.synced {
		if s == name {
			n++
		}
	}
	return n
}

// runController runs a Controller with the handlers given, each with a queue of its own (a nil expand handler
// gets none, as for a driver that only modifies), on a fake API server, until the test ends.
func runController(t *testing.T, expand, modify Handler) (context.Context, *fake.Clientset, *Controller) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := sharedtestutil.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	qm, err := workqueue.NewMetrics(metrics.NewRegistry().Registerer())
	if err != nil {
		t.Fatal(err)
	}
	queue := func(name string) workqueue.Queue[string] {
		q, err := workqueue.New[string](qm, workqueue.Config{Name: name, RetryIntervalStart: time.Millisecond, RetryIntervalMax: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	cfg := Config{
		Driver: testutil.Driver, PVCInformer: factory.Core().V1().PersistentVolumeClaims(), PVInformer: factory.Core().V1().PersistentVolumes(),
		VACInformer: factory.Storage().V1().VolumeAttributesClasses(), Workers: 1,
	}
	if expand != nil {
		cfg.Expand, cfg.ExpandQueue = expand, queue("expand")
	}
	cfg.Modify, cfg.ModifyQueue = modify, queue("modify")
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	return ctx, client, c
}

// The informers feed each queue what concerns it: a new claim both, a bigger request the expand queue only, a
// new class the modify queue only, a created VolumeAttributesClass the claims that name it, a volume of the
// driver its claim; a deleted claim is forgotten by both handlers.
func TestEventsReachTheRightQueue(t *testing.T) {
	expand := &recorder{version: map[string]string{}}
	modify := &recorder{version: map[string]string{}}
	ctx, client, _ := runController(t, expand, modify)
	claims := client.CoreV1().PersistentVolumeClaims(testutil.Namespace)
	wait := func(r *recorder, name string, n int) {
		t.Helper()
		sharedtestutil.Eventually(t, 10*time.Second, "sync of "+name, func() (bool, error) { return r.count(name) >= n, nil })
	}

	pvc, err := claims.Create(ctx, testutil.PVC("c1", "pv1", "1Gi", "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wait(expand, "c1", 1)
	wait(modify, "c1", 1)

	pvc.Spec.Resources.Requests[v1.ResourceStorage] = resource.MustParse("2Gi")
	if pvc, err = claims.Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait(expand, "c1", 2)

	gold := "gold"
	pvc.Spec.VolumeAttributesClassName = &gold
	if pvc, err = claims.Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait(modify, "c1", 2)

	if _, err := client.StorageV1().VolumeAttributesClasses().Create(ctx, testutil.VAC("gold", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait(modify, "c1", 3)

	if _, err := client.CoreV1().PersistentVolumes().Create(ctx, testutil.PV("pv1", "vol-1", "1Gi", "c1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait(expand, "c1", 3)
	wait(modify, "c1", 4)

	// A status-only write that changes neither the request, the capacity nor the class queues nothing; the
	// sentinel claim c2, created after it, is synced once everything queued before it was.
	pvc.Status.Conditions = []v1.PersistentVolumeClaimCondition{{Type: v1.PersistentVolumeClaimResizing, Status: v1.ConditionTrue}}
	if _, err := claims.UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := claims.Create(ctx, testutil.PVC("c2", "pv2", "1Gi", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait(expand, "c2", 1)
	wait(modify, "c2", 1)
	if n := expand.count("c1"); n != 3 {
		t.Errorf("expand syncs of c1 = %d, want 3 (the status-only write queued it)", n)
	}

	if err := claims.Delete(ctx, "c1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sharedtestutil.Eventually(t, 10*time.Second, "c1 forgotten", func() (bool, error) {
		expand.mu.Lock()
		defer expand.mu.Unlock()
		modify.mu.Lock()
		defer modify.mu.Unlock()
		key := testutil.Namespace + "/c1"
		return slices.Contains(expand.forgot, key) && slices.Contains(modify.forgot, key), nil
	})
}

// A driver that only modifies volumes runs without an expand handler or queue: claims reach the modify
// handler, and a bigger request, a requeue, a deleted claim and the driver coming back touch no expand queue
// (there is none to touch).
func TestModifyOnlyWithoutAnExpandHandler(t *testing.T) {
	modify := &recorder{version: map[string]string{}}
	ctx, client, c := runController(t, nil, modify)
	claims := client.CoreV1().PersistentVolumeClaims(testutil.Namespace)
	pvc, err := claims.Create(ctx, testutil.PVC("c1", "pv1", "1Gi", "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sharedtestutil.Eventually(t, 10*time.Second, "the new claim to reach the modify handler", func() (bool, error) {
		return modify.count("c1") >= 1, nil
	})
	gold := "gold"
	pvc.Spec.VolumeAttributesClassName = &gold
	pvc.Spec.Resources.Requests[v1.ResourceStorage] = resource.MustParse("2Gi")
	if _, err = claims.Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sharedtestutil.Eventually(t, 10*time.Second, "the class change to reach the modify handler", func() (bool, error) {
		return modify.count("c1") >= 2, nil
	})
	c.Requeue(testutil.Namespace, "c1")
	c.DriverBack(ctx)
	if err := claims.Delete(ctx, "c1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sharedtestutil.Eventually(t, 10*time.Second, "the deleted claim to be forgotten", func() (bool, error) {
		modify.mu.Lock()
		defer modify.mu.Unlock()
		return slices.Contains(modify.forgot, testutil.Namespace+"/c1"), nil
	})
}
