package events

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stowage-csi/stowage/shared/testutil"
)

func TestRecorderWritesEvents(t *testing.T) {
	tests := []struct {
		name      string
		obj       *corev1.PersistentVolumeClaim
		eventType string
		reason    string
		wantNS    string
	}{
		{"normal", &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "apps", UID: "u1"}},
			corev1.EventTypeNormal, "ProvisioningSucceeded", "apps"},
		{"warning", &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "logs", Namespace: "ops", UID: "u2"}},
			corev1.EventTypeWarning, "ProvisioningFailed", "ops"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r, err := New(ctx, client, Options{Component: "csi-provisioner"})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Shutdown()
			r.Eventf(tt.obj, tt.eventType, tt.reason, "volume %s", "pvc-1")

			var got *corev1.Event
			testutil.Eventually(t, 30*time.Second, "an Event written", func() (bool, error) {
				list, err := client.CoreV1().Events(tt.wantNS).List(ctx, metav1.ListOptions{})
				if err != nil || len(list.Items) == 0 {
					return false, err
				}
				got = &list.Items[0]
				return true, nil
			})
			if got.Reason != tt.reason || got.Type != tt.eventType || got.Message != "volume pvc-1" ||
				got.Source.Component != "csi-provisioner" || got.InvolvedObject.Name != tt.obj.Name {
				t.Errorf("event = reason %q type %q message %q source %q object %q", got.Reason, got.Type, got.Message,
					got.Source.Component, got.InvolvedObject.Name)
			}
		})
	}
}

func TestRecorderNeedsComponent(t *testing.T) {
	if _, err := New(context.Background(), fake.NewClientset(), Options{}); err == nil {
		t.Fatal("New without a component succeeded")
	}
}

// A retry loop on one object records the same Event again and again: client-go alone writes each repetition as a
// PATCH of the count; coalesced, the repetitions of a window are one PATCH with the last count.
func TestRepeatedEventsCoalesce(t *testing.T) {
	const repeats = 20 // under the correlator's spam filter burst (25), so each one reaches the sink
	for _, tc := range []struct {
		name        string
		window      time.Duration
		wantPatches int
	}{
		{"client-go's behaviour", -1, repeats - 1},
		{"coalesced", time.Hour, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r, err := New(ctx, client, Options{Component: "csi-provisioner", CoalesceWindow: tc.window})
			if err != nil {
				t.Fatal(err)
			}
			obj := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "apps", UID: "u1"}}
			for range repeats {
				r.Event(obj, corev1.EventTypeWarning, "ProvisioningFailed", "driver busy")
			}
			// Every repetition has reached the sink: written (client-go) or held (coalesced).
			testutil.Eventually(t, 30*time.Second, "all repetitions at the sink", func() (bool, error) {
				if tc.window < 0 {
					return countActions(client, "patch") == repeats-1, nil
				}
				r.sink.mu.Lock()
				defer r.sink.mu.Unlock()
				for _, h := range r.sink.held {
					return h.event.Count == repeats, nil
				}
				return false, nil
			})
			r.Shutdown()
			if c, p := countActions(client, "create"), countActions(client, "patch"); c != 1 || p != tc.wantPatches {
				t.Errorf("%d creates and %d patches for %d repetitions, want 1 and %d", c, p, repeats, tc.wantPatches)
			}
			list, err := client.CoreV1().Events("apps").List(ctx, metav1.ListOptions{})
			if err != nil || len(list.Items) != 1 || list.Items[0].Count != repeats {
				t.Errorf("stored events %+v (err %v), want one with count %d", list, err, repeats)
			}
		})
	}
}

// The API server takes no Events (a stuck connection, a throttled client): a worker recording thousands of Events
// is never held up by it, since the broadcaster queues them and drops what does not fit.
func TestRecordingNeverBlocksOnAStuckSink(t *testing.T) {
	client := fake.NewClientset()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(entered) })
		<-release
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := New(ctx, client, Options{Component: "csi-provisioner"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown()
	defer close(release)
	r.Event(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "first", Namespace: "apps", UID: "u0"}}, corev1.EventTypeNormal, "Provisioning", "x")
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the first Event never reached the API client")
	}
	// The sink is stuck in its first write now; a worker records many more.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 5000 {
			obj := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i), Namespace: "apps", UID: types.UID(fmt.Sprint(i))}}
			r.Event(obj, corev1.EventTypeNormal, "Provisioning", "x")
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("recording Events blocked while the API server took none")
	}
}

func countActions(client *fake.Clientset, verb string) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == "events" {
			n++
		}
	}
	return n
}
