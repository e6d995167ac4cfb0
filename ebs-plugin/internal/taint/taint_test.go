package taint

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stowage-csi/stowage/shared/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	driverName = "ebs.csi.aws.com"
	nodeName   = "node-1"
	timeout    = 10 * time.Second
)

var (
	notReadyNoExecute  = corev1.Taint{Key: AgentNotReady, Effect: corev1.TaintEffectNoExecute}
	notReadyNoSchedule = corev1.Taint{Key: AgentNotReady, Effect: corev1.TaintEffectNoSchedule}
	other              = corev1.Taint{Key: "example.com/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
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

func config(client *fake.Clientset) Config {
	// Attempts a millisecond apart keep the tests fast; they wait on API actions, never on time.
	return Config{Client: client, NodeName: nodeName, Driver: driverName, Backoff: wait.Backoff{Duration: time.Millisecond}}
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
		{name: "CSINode listing another driver", csiNode: csiNode("efs.csi.aws.com")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objects := []runtime.Object{node(other, notReadyNoExecute, notReadyNoSchedule)}
			if tc.csiNode != nil {
				objects = append(objects, tc.csiNode)
			}
			client := testutil.NewClientset(objects...)
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			done := start(ctx, config(client))

			// Three reads of the CSINode: the remover has looked, found the driver missing, and retried.
			testutil.Eventually(t, timeout, "the remover reading the CSINode three times", func() (bool, error) {
				return count(client, "get", "csinodes") >= 3, nil
			})
			if n := count(client, "patch", "nodes") + count(client, "update", "nodes"); n != 0 {
				t.Fatalf("%d Node writes before the driver was registered", n)
			}
			if got := taints(t, client); len(got) != 3 {
				t.Fatalf("taints before registration = %v, want all three", got)
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
			waitDone(t, done)

			if got := taints(t, client); !slices.Equal(got, []corev1.Taint{other}) {
				t.Fatalf("taints = %v, want only %v", got, other)
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

func TestNoWriteWithoutTheTaint(t *testing.T) {
	client := testutil.NewClientset(node(other), csiNode(driverName))
	if err := Remove(context.Background(), config(client)); err != nil {
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
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := Remove(ctx, config(client)); err != nil {
		t.Fatal(err)
	}
	if got := taints(t, client); !slices.Equal(got, []corev1.Taint{late}) {
		t.Fatalf("taints = %v, want only %v", got, late)
	}
	if n := count(client, "patch", "nodes"); n != 2 {
		t.Fatalf("%d Node patches, want 2 (one conflict, one retry)", n)
	}
}

func TestContextEndStopsTheRetries(t *testing.T) {
	client := testutil.NewClientset(node(notReadyNoExecute))
	ctx, cancel := context.WithCancelCause(context.Background())
	done := start(ctx, config(client))
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
