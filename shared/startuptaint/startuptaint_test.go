package startuptaint

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/stowage-csi/stowage/shared/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	driverName = "s3.csi.aws.com"
	taintKey   = "s3.csi.aws.com/agent-not-ready"
	nodeName   = "node-1"
	// timeout bounds the waits for the remover's goroutine; the remover's own waits run on a fake clock.
	timeout = 10 * time.Second
)

var (
	notReadyNoExecute  = corev1.Taint{Key: taintKey, Effect: corev1.TaintEffectNoExecute}
	notReadyNoSchedule = corev1.Taint{Key: taintKey, Effect: corev1.TaintEffectNoSchedule}
	// otherDriver's startup taint is another driver's business: it must stay.
	otherDriver = corev1.Taint{Key: "ebs.csi.aws.com/agent-not-ready", Effect: corev1.TaintEffectNoExecute}
	other       = corev1.Taint{Key: "example.com/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
)

func node(taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}, Spec: corev1.NodeSpec{Taints: taints}}
}

func csiNode(drivers ...string) *storagev1.CSINode {
	n := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	for _, d := range drivers {
		n.Spec.Drivers = append(n.Spec.Drivers, storagev1.CSINodeDriver{Name: d, NodeID: "i-1"})
	}
	return n
}

// withCount gives driver's entry in n the attach limit the kubelet writes.
func withCount(n *storagev1.CSINode, driver string, count int32) *storagev1.CSINode {
	for i := range n.Spec.Drivers {
		if n.Spec.Drivers[i].Name == driver {
			n.Spec.Drivers[i].Allocatable = &storagev1.VolumeNodeResources{Count: &count}
		}
	}
	return n
}

func config(client *fake.Clientset, clk clock.Clock) Config {
	return Config{Client: client, NodeName: nodeName, Driver: driverName, TaintKey: taintKey, Clock: clk}
}

// fakeClock is a fake clock that records the delay of each timer the remover starts, so a test can let
// exactly that much time pass.
type fakeClock struct {
	*testingclock.FakeClock
	mu     sync.Mutex
	delays []time.Duration
	woken  int // timers fired by wake; the test's goroutine only
}

func newClock() *fakeClock {
	return &fakeClock{FakeClock: testingclock.NewFakeClock(time.Unix(1_800_000_000, 0))}
}

func (c *fakeClock) NewTimer(d time.Duration) clock.Timer {
	// Recorded once the timer exists, so that wake never steps the clock before it.
	t := c.FakeClock.NewTimer(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.delays = append(c.delays, d)
	return t
}

func (c *fakeClock) recorded() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.delays)
}

// wake waits until the remover waits to retry, then lets exactly its delay pass.
func (c *fakeClock) wake(t *testing.T) {
	t.Helper()
	testutil.Eventually(t, timeout, "the remover waiting to retry", func() (bool, error) { return len(c.recorded()) > c.woken, nil })
	d := c.recorded()[c.woken]
	c.woken++
	c.Step(d)
}

func start(ctx context.Context, c Config) <-chan error {
	done := make(chan error, 1)
	go func() { done <- Remove(ctx, c) }()
	return done
}

func waitDone(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Remove = %v, want nil", err)
		}
	case <-time.After(timeout):
		t.Fatal("Remove did not return")
	}
}

// count is the number of recorded actions with verb on resource.
func count(client *fake.Clientset, verb, resource string) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

func taints(t *testing.T, client *fake.Clientset) []corev1.Taint {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Spec.Taints
}

func TestTaintIsRemovedOnlyOnceCSINodeListsTheDriver(t *testing.T) {
	tests := []struct {
		name    string
		csiNode runtime.Object // before registration; nil: no CSINode yet
	}{
		{name: "no CSINode yet"},
		{name: "CSINode without drivers", csiNode: csiNode()},
		{name: "CSINode listing another driver", csiNode: csiNode("ebs.csi.aws.com")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objects := []runtime.Object{node(other, notReadyNoExecute, otherDriver, notReadyNoSchedule)}
			if tc.csiNode != nil {
				objects = append(objects, tc.csiNode)
			}
			client := testutil.NewClientset(objects...)
			clk := newClock()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			done := start(ctx, config(client, clk))

			// Three reads of the CSINode: the remover has looked, found the driver missing, and retried.
			clk.wake(t)
			clk.wake(t)
			testutil.Eventually(t, timeout, "the remover reading the CSINode three times", func() (bool, error) {
				return count(client, "get", "csinodes") >= 3, nil
			})
			if n := count(client, "patch", "nodes") + count(client, "update", "nodes"); n != 0 {
				t.Fatalf("%d Node writes before the driver was registered", n)
			}

			// The kubelet registers the driver.
			registered := csiNode(driverName)
			var err error
			if tc.csiNode == nil {
				_, err = client.StorageV1().CSINodes().Create(ctx, registered, metav1.CreateOptions{})
			} else {
				_, err = client.StorageV1().CSINodes().Update(ctx, registered, metav1.UpdateOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
			clk.wake(t)
			waitDone(t, done)

			if got, want := taints(t, client), []corev1.Taint{other, otherDriver}; !slices.Equal(got, want) {
				t.Fatalf("taints = %v, want %v", got, want)
			}
			if n := count(client, "patch", "nodes"); n != 1 {
				t.Fatalf("%d Node patches, want 1", n)
			}
			for _, a := range client.Actions() {
				if p, ok := a.(k8stesting.PatchAction); ok && !strings.Contains(string(p.GetPatch()), `"resourceVersion"`) {
					t.Errorf("patch %s is not preconditioned on the resourceVersion", p.GetPatch())
				}
			}
		})
	}
}

// A driver with an attach limit: the kubelet writes the CSINode entry before its count, and the taint must
// stay until the count is there too.
func TestTaintWaitsForTheAllocatableCountWhenRequired(t *testing.T) {
	client := testutil.NewClientset(node(notReadyNoExecute), csiNode(driverName))
	clk := newClock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := config(client, clk)
	c.RequireAllocatable = true
	done := start(ctx, c)

	clk.wake(t)
	testutil.Eventually(t, timeout, "the remover reading the CSINode twice", func() (bool, error) {
		return count(client, "get", "csinodes") >= 2, nil
	})
	if n := count(client, "patch", "nodes") + count(client, "update", "nodes"); n != 0 {
		t.Fatalf("%d Node writes before the CSINode carried the allocatable count", n)
	}
	if _, err := client.StorageV1().CSINodes().Update(ctx, withCount(csiNode(driverName), driverName, 25), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.wake(t)
	waitDone(t, done)
	if got := taints(t, client); len(got) != 0 {
		t.Fatalf("taints = %v, want none", got)
	}
}

func TestNoWriteWithoutTheTaint(t *testing.T) {
	client := testutil.NewClientset(node(other, otherDriver), csiNode(driverName))
	if err := Remove(context.Background(), config(client, newClock())); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" || a.GetResource().Resource != "nodes" {
			t.Errorf("unexpected %s %s; a Node without the taint needs one read and nothing else", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

func TestTaintAddedConcurrentlyIsKept(t *testing.T) {
	client := testutil.NewClientset(node(notReadyNoExecute), csiNode(driverName))
	late := corev1.Taint{Key: "example.com/late", Effect: corev1.TaintEffectNoSchedule}
	first := true
	// Before the first patch lands, someone else adds a taint: the patch, preconditioned on the version the
	// remover read, must fail, and the retry must keep the new taint.
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !first {
			return false, nil, nil
		}
		first = false
		n := node(notReadyNoExecute, late)
		n.ResourceVersion = "concurrent-write"
		if err := client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), n, ""); err != nil {
			return true, nil, err
		}
		return false, nil, nil
	})
	clk := newClock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := start(ctx, config(client, clk))
	clk.wake(t)
	waitDone(t, done)
	if got := taints(t, client); !slices.Equal(got, []corev1.Taint{late}) {
		t.Fatalf("taints = %v, want only %v", got, late)
	}
	if n := count(client, "patch", "nodes"); n != 2 {
		t.Fatalf("%d Node patches, want 2 (one conflict, one retry)", n)
	}
}

// The remover used to give up after about eight minutes (s3-node) and leave the node tainted for good. It must
// keep trying, with a backoff that doubles up to a minute, for as long as its context lasts.
func TestFailingAPIIsRetriedForEverWithCappedBackoff(t *testing.T) {
	client := testutil.NewClientset(node(other, notReadyNoExecute), csiNode(driverName))
	var failing atomic.Bool
	failing.Store(true)
	client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, apierrors.NewInternalError(errors.New("etcd is unhappy"))
		}
		return false, nil, nil
	})
	clk := newClock()
	begin := clk.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := start(ctx, config(client, clk))

	// 7 growing waits (63.5 s in all), then 13 of a minute: past 14 minutes.
	const failures = 20
	for range failures - 1 {
		clk.wake(t)
	}
	// The last failure has happened once its retry waits; only then may the API server recover.
	testutil.Eventually(t, timeout, "the last failed attempt", func() (bool, error) { return len(clk.recorded()) == failures, nil })
	failing.Store(false)
	clk.wake(t)
	waitDone(t, done)

	if n := count(client, "get", "nodes"); n != failures+1 {
		t.Fatalf("%d Node reads, want %d", n, failures+1)
	}
	if got := taints(t, client); !slices.Equal(got, []corev1.Taint{other}) {
		t.Fatalf("taints = %v, want only %v", got, other)
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 32 * time.Second}
	for len(want) < failures {
		want = append(want, time.Minute)
	}
	if got := clk.recorded(); !slices.Equal(got, want) {
		t.Errorf("waits = %v, want %v", got, want)
	}
	if elapsed := clk.Since(begin); elapsed < 14*time.Minute {
		t.Errorf("removed after %s of retries, want past 14 minutes", elapsed)
	}
}

func TestContextEndStopsTheRetries(t *testing.T) {
	client := testutil.NewClientset(node(notReadyNoExecute))
	clk := newClock()
	ctx, cancel := context.WithCancelCause(context.Background())
	done := start(ctx, config(client, clk))
	clk.wake(t)
	testutil.Eventually(t, timeout, "a retry", func() (bool, error) { return count(client, "get", "csinodes") >= 2, nil })
	stopped := errors.New("node plugin stopping")
	cancel(stopped)
	select {
	case err := <-done:
		if !errors.Is(err, stopped) || !strings.Contains(err.Error(), "does not exist yet") {
			t.Fatalf("Remove = %v, want the context's cause and the last reason", err)
		}
	case <-time.After(timeout):
		t.Fatal("Remove did not return when its context ended")
	}
}

func TestBackoffDoublesUpToItsCap(t *testing.T) {
	tests := []struct {
		name         string
		initial, max time.Duration
		want         []time.Duration
	}{
		{name: "defaults", want: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second,
			8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}},
		{name: "cap below the first delay", initial: time.Minute, max: time.Second, want: []time.Duration{time.Second, time.Second}},
		{name: "cap between doublings", initial: time.Second, max: 3 * time.Second, want: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackoff(tc.initial, tc.max)
			for i, w := range tc.want {
				got, capped := b.next()
				if got != w {
					t.Fatalf("delay %d = %s, want %s", i, got, w)
				}
				if wantCapped := i == len(tc.want)-1 || tc.want[i+1] == w; capped != wantCapped {
					t.Errorf("delay %d capped = %v, want %v", i, capped, wantCapped)
				}
			}
		})
	}
}
