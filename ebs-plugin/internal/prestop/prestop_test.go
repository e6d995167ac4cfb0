package prestop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/testutil"
)

// TestMain fails the package if the informer outlives Run.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	driverName = "ebs.csi.aws.com"
	nodeName   = "node-1"
	timeout    = 10 * time.Second
)

func node(taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}, Spec: corev1.NodeSpec{Taints: taints}}
}

func va(name, attacher, node string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: attacher, NodeName: node}}
}

// logLines collects the hook's log lines, so a test can wait for the hook to report what it waits for.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) ctx(parent context.Context) context.Context {
	logger := funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 2})
	return klog.NewContext(parent, logger)
}

// has reports whether some line contains every one of parts; when none does, the error carries the lines.
func (l *logLines) has(parts ...string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true, nil
		}
	}
	return false, fmt.Errorf("no log line has all of %q; lines:\n%s", parts, strings.Join(l.lines, "\n"))
}

func start(ctx context.Context, client *fake.Clientset) <-chan error {
	done := make(chan error, 1)
	go func() { done <- Run(ctx, client, nodeName, driverName) }()
	return done
}

func TestDrainingNodeWaitsUntilItsLastVolumeAttachmentIsDeleted(t *testing.T) {
	for _, taint := range []string{corev1.TaintNodeUnschedulable, TaintClusterAutoscaler, TaintKarpenter, TaintKarpenterV1Beta1} {
		t.Run(taint, func(t *testing.T) {
			client := testutil.NewClientset(node(corev1.Taint{Key: taint, Effect: corev1.TaintEffectNoSchedule}),
				va("va-1", driverName, nodeName), va("va-2", driverName, nodeName),
				va("other-driver", "other.csi.example.com", nodeName), va("other-node", driverName, "node-2"))
			var logs logLines
			ctx, cancel := context.WithTimeout(logs.ctx(context.Background()), timeout)
			defer cancel()
			done := start(ctx, client)

			testutil.Eventually(t, timeout, "the hook waiting for va-1 and va-2", func() (bool, error) {
				return logs.has("Waiting for VolumeAttachments", `["va-1" "va-2"]`)
			})
			deleteVA(t, client, "va-1")
			// The log line is written just before the hook blocks again, so the hook has seen the deletion
			// and is still waiting, for va-2 alone.
			testutil.Eventually(t, timeout, "the hook waiting for va-2 alone", func() (bool, error) {
				return logs.has("Waiting for VolumeAttachments", `["va-2"]`)
			})
			select {
			case err := <-done:
				t.Fatalf("Run returned %v while va-2 was still there", err)
			default:
			}
			deleteVA(t, client, "va-2")
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Run = %v, want nil once the node's last VolumeAttachment is gone", err)
				}
			case <-time.After(timeout):
				t.Fatal("Run did not return after the last VolumeAttachment of the node was deleted")
			}
		})
	}
}

func deleteVA(t *testing.T, client *fake.Clientset, name string) {
	t.Helper()
	if err := client.StorageV1().VolumeAttachments().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestReturnsAtOnce(t *testing.T) {
	tests := []struct {
		name    string
		objects []runtime.Object
	}{
		{name: "node not draining, with attachments", objects: []runtime.Object{
			node(corev1.Taint{Key: "example.com/other", Effect: corev1.TaintEffectNoSchedule}), va("va-1", driverName, nodeName)}},
		{name: "node draining, only other drivers' and nodes' attachments", objects: []runtime.Object{
			node(corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}),
			va("other-driver", "other.csi.example.com", nodeName), va("other-node", driverName, "node-2")}},
		{name: "node deleted, no attachments", objects: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := testutil.NewClientset(tc.objects...)
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if err := Run(ctx, client, nodeName, driverName); err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
		})
	}
}

func TestNotDrainingNeverLooksAtVolumeAttachments(t *testing.T) {
	client := testutil.NewClientset(node(), va("va-1", driverName, nodeName))
	if err := Run(context.Background(), client, nodeName, driverName); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "volumeattachments" {
			t.Errorf("unexpected %s volumeattachments on a node that is not draining", a.GetVerb())
		}
	}
}

func TestContextEndStopsTheWaitAndNamesWhatIsLeft(t *testing.T) {
	tests := []struct {
		name    string
		objects []runtime.Object
	}{
		{name: "draining", objects: []runtime.Object{
			node(corev1.Taint{Key: TaintKarpenter, Effect: corev1.TaintEffectNoSchedule}), va("va-1", driverName, nodeName)}},
		{name: "node deleted", objects: []runtime.Object{va("va-1", driverName, nodeName)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := testutil.NewClientset(tc.objects...)
			var logs logLines
			ctx, cancel := context.WithCancelCause(logs.ctx(context.Background()))
			defer cancel(nil)
			done := start(ctx, client)
			testutil.Eventually(t, timeout, "the hook waiting for va-1", func() (bool, error) {
				return logs.has("Waiting for VolumeAttachments", "va-1")
			})
			gracePeriod := errors.New("terminationGracePeriodSeconds passed")
			cancel(gracePeriod)
			select {
			case err := <-done:
				if !errors.Is(err, gracePeriod) || !strings.Contains(err.Error(), "va-1") {
					t.Fatalf("Run = %v, want the context's cause and va-1 named", err)
				}
			case <-time.After(timeout):
				t.Fatal("Run did not return when its context ended")
			}
		})
	}
}

func TestRunWithoutNodeNameFails(t *testing.T) {
	if err := Run(context.Background(), testutil.NewClientset(), "", driverName); err == nil || !strings.Contains(err.Error(), "CSI_NODE_NAME") {
		t.Fatalf("Run = %v, want an error naming CSI_NODE_NAME", err)
	}
}

func TestDraining(t *testing.T) {
	tests := []struct {
		taint corev1.Taint
		want  bool
	}{
		{corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, true},
		{corev1.Taint{Key: TaintClusterAutoscaler, Value: "1700000000", Effect: corev1.TaintEffectNoSchedule}, true},
		{corev1.Taint{Key: TaintKarpenter, Effect: corev1.TaintEffectNoSchedule}, true},
		{corev1.Taint{Key: TaintKarpenterV1Beta1, Value: "disrupting", Effect: corev1.TaintEffectNoSchedule}, true},
		{corev1.Taint{Key: "DeletionCandidateOfClusterAutoscaler", Effect: corev1.TaintEffectPreferNoSchedule}, false},
		{corev1.Taint{Key: "ebs.csi.aws.com/agent-not-ready", Effect: corev1.TaintEffectNoExecute}, false},
	}
	for _, tc := range tests {
		if got := Draining(node(tc.taint)); got != tc.want {
			t.Errorf("Draining(%s) = %v, want %v", tc.taint.Key, got, tc.want)
		}
	}
}
