package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/stowage-csi/stowage/provisioner/internal/provision"
	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

// recorder is a Syncer that counts calls and returns a chosen error.
type recorder struct {
	mu        sync.Mutex
	claims    map[string]int
	volumes   map[string]int
	sources   map[string]int
	forgotten []string
	claimErr  error
	// settled names the claims and PVs ClaimSettled and VolumeSettled report settled.
	settled map[string]bool
}

func (r *recorder) IsOurs(c *v1.PersistentVolumeClaim) bool {
	return c.Annotations["volume.kubernetes.io/storage-provisioner"] == testutil.Driver
}
func (r *recorder) IsOursPV(pv *v1.PersistentVolume) bool { return pv.Spec.CSI != nil }

func (r *recorder) ClaimSettled(c *v1.PersistentVolumeClaim) bool { return r.settled[c.Name] }
func (r *recorder) VolumeSettled(pv *v1.PersistentVolume) bool    { return r.settled[pv.Name] }
func (r *recorder) SyncClaim(_ context.Context, c *v1.PersistentVolumeClaim) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.claims[c.Name]++
	return r.claimErr
}
func (r *recorder) SyncVolume(_ context.Context, pv *v1.PersistentVolume) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.volumes[pv.Name]++
	return nil
}
func (r *recorder) SyncCloneSource(_ context.Context, ns, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sources[ns+"/"+name]++
	return nil
}
func (r *recorder) SyncGoneClaim(context.Context, string, string) error { return nil }
func (r *recorder) ForgetClaim(ns, name string)                         { r.forget(ns + "/" + name) }
func (r *recorder) Forget(name string)                                  { r.forget(name) }
func (r *recorder) forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgotten = append(r.forgotten, key)
}

func (r *recorder) count(m map[string]int, k string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return m[k]
}

// newQueues returns the controller's three queues with the given per-item backoff, shut down when the test ends
// (shutting down a queue twice is harmless, so a Controller that did it already is fine).
func newQueues(t *testing.T, retryStart, retryMax time.Duration) Queues {
	t.Helper()
	qm, err := workqueue.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var q Queues
	for name, p := range map[string]*workqueue.Queue[string]{"claims": &q.Claims, "volumes": &q.Volumes, "clone-sources": &q.CloneSources} {
		if *p, err = workqueue.New[string](qm, workqueue.Config{Name: name, RetryIntervalStart: retryStart, RetryIntervalMax: retryMax}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup((*p).ShutDown)
	}
	return q
}

// start runs a Controller over informers of kube with r until the test ends; wrap, if set, wraps the claim queue.
func start(t *testing.T, r *recorder, kube *fake.Clientset, wrap func(workqueue.Queue[string]) workqueue.Queue[string]) {
	t.Helper()
	q := newQueues(t, 5*time.Millisecond, 20*time.Millisecond)
	if wrap != nil {
		q.Claims = wrap(q.Claims)
	}
	startWith(t, r, kube, q)
}

// startWith runs a Controller with queues q over informers of kube with r until the test ends, its informers
// synced before it starts, and returns it.
func startWith(t *testing.T, r *recorder, kube *fake.Clientset, q Queues) *Controller {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(kube, 0)
	c, err := New(Config{Workers: 2, CloneWorkers: 1, SlowRetry: time.Hour}, r, Informers{
		Claims:      factory.Core().V1().PersistentVolumeClaims().Informer(),
		Volumes:     factory.Core().V1().PersistentVolumes().Informer(),
		Classes:     factory.Storage().V1().StorageClasses().Informer(),
		Attachments: factory.Storage().V1().VolumeAttachments().Informer(),
	}, q)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	return c
}

func newRecorder() *recorder {
	return &recorder{claims: map[string]int{}, volumes: map[string]int{}, sources: map[string]int{}}
}

// waitTimeout bounds every wait for the controller: generous, since it only matters when a test fails.
const waitTimeout = 10 * time.Second

// retryQueue records how the controller asks for an item to be retried, and when it forgets one.
type retryQueue struct {
	workqueue.Queue[string]
	mu    sync.Mutex
	calls []string
}

func (q *retryQueue) record(call string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls = append(q.calls, call)
}

func (q *retryQueue) AddRateLimited(key string) {
	q.record("AddRateLimited " + key)
	q.Queue.AddRateLimited(key)
}

func (q *retryQueue) AddAfter(key string, d time.Duration) {
	q.record(fmt.Sprintf("AddAfter %s %s", key, d))
	q.Queue.AddAfter(key, d)
}

func (q *retryQueue) Forget(key string) {
	q.record("Forget " + key)
	q.Queue.Forget(key)
}

func (q *retryQueue) recorded() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.calls)
}

// After a failed sync the controller either backs off from retry-interval-start (an ordinary error) or, for an
// error retrying soon will not fix, queues one retry after SlowRetry and forgets the backoff. The test reads what
// the controller asked of the queue after the first sync, up to the Forget or AddRateLimited that ends it.
func TestSlowErrorsAreNotRetriedSoon(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"ordinary error backs off from retry-interval-start", errors.New("boom"), []string{"AddRateLimited ns/data"}},
		{"slow error waits retry-interval-max", provision.Slow(errors.New("bad parameter")), []string{"AddAfter ns/data 1h0m0s", "Forget ns/data"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder()
			r.claimErr = tc.err
			kube := fake.NewClientset(testutil.Claim("ns", "data", "uid-1", "fast", "1Gi"))
			q := &retryQueue{}
			start(t, r, kube, func(claims workqueue.Queue[string]) workqueue.Queue[string] { q.Queue = claims; return q })
			var got []string
			sharedtestutil.Eventually(t, waitTimeout, "the first sync's retry", func() (bool, error) {
				got = q.recorded()
				return len(got) >= len(tc.want), nil
			})
			if got = got[:len(tc.want)]; !slices.Equal(got, tc.want) {
				t.Errorf("queue calls after the first sync %q, want %q", got, tc.want)
			}
			if tc.want[0] == "AddRateLimited ns/data" {
				sharedtestutil.Eventually(t, waitTimeout, "retries", func() (bool, error) { return r.count(r.claims, "data") >= 3, nil })
			}
		})
	}
}

func TestEventsReachTheRightQueue(t *testing.T) {
	r := newRecorder()
	pvName := "pv-1"
	clone := testutil.Claim("ns", "clone", "uid-2", "fast", "1Gi", func(c *v1.PersistentVolumeClaim) {
		c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
	})
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName, UID: "pv-uid"},
		Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: testutil.Driver}}}}
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va"},
		Spec: storagev1.VolumeAttachmentSpec{Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName}}}
	kube := fake.NewClientset(clone, pv, va)
	start(t, r, kube, nil)
	sharedtestutil.Eventually(t, waitTimeout, "claim and clone source synced", func() (bool, error) {
		return r.count(r.claims, "clone") == 1 && r.count(r.sources, "ns/src") == 1 && r.count(r.volumes, pvName) == 1, nil
	})
	ctx := context.Background()
	if err := kube.StorageV1().VolumeAttachments().Delete(ctx, "va", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sharedtestutil.Eventually(t, waitTimeout, "PV requeued after its VolumeAttachment went", func() (bool, error) { return r.count(r.volumes, pvName) == 2, nil })
	if err := kube.CoreV1().PersistentVolumes().Delete(ctx, pvName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sharedtestutil.Eventually(t, waitTimeout, "deleted PV forgotten by its worker", func() (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return fmt.Sprint(r.forgotten) == "[pv-1]", nil
	})
	if err := kube.CoreV1().PersistentVolumeClaims("ns").Delete(ctx, "clone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sharedtestutil.Eventually(t, waitTimeout, "deleted claim forgotten by its worker", func() (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return fmt.Sprint(r.forgotten) == "[pv-1 ns/clone]", nil
	})
}

// A clone whose source is not bound yet fails and backs off; the source's binding requeues it at once.
func TestSourceBindingRequeuesClones(t *testing.T) {
	r := newRecorder()
	src := testutil.Claim("ns", "src", "uid-src", "fast", "1Gi")
	clone := testutil.Claim("ns", "clone", "uid-clone", "fast", "1Gi", func(c *v1.PersistentVolumeClaim) {
		c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
	})
	kube := fake.NewClientset(src, clone)
	start(t, r, kube, nil)
	sharedtestutil.Eventually(t, waitTimeout, "first sync of the clone", func() (bool, error) { return r.count(r.claims, "clone") == 1, nil })
	bound := src.DeepCopy()
	bound.Status.Phase = v1.ClaimBound
	bound.Spec.VolumeName = "pv-src"
	if _, err := kube.CoreV1().PersistentVolumeClaims("ns").Update(context.Background(), bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sharedtestutil.Eventually(t, waitTimeout, "clone requeued by the binding of its source", func() (bool, error) { return r.count(r.claims, "clone") == 2, nil })
}
