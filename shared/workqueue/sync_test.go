package workqueue

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
)

// The process function of SyncCached: a missing object is done with, a lister failure is retried naming the
// object, the handler gets the cached object with a logger naming it, and its delay requeues the name.
func TestSyncCached(t *testing.T) {
	q, err := New[string](newMetrics(t), Config{Name: "q", RetryIntervalStart: time.Second, RetryIntervalMax: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer q.ShutDown()
	cached := map[string]*corev1.ConfigMap{"later": {ObjectMeta: metav1.ObjectMeta{Name: "later"}}, "done": {ObjectMeta: metav1.ObjectMeta{Name: "done"}},
		"fails": {ObjectMeta: metav1.ObjectMeta{Name: "fails"}}}
	get := func(name string) (*corev1.ConfigMap, error) {
		if name == "broken" {
			return nil, errors.New("cache broken")
		}
		if cm, ok := cached[name]; ok {
			return cm, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
	}
	var handled []string
	handle := func(ctx context.Context, cm *corev1.ConfigMap) (time.Duration, error) {
		handled = append(handled, cm.Name)
		if klog.FromContext(ctx).GetSink() == nil {
			t.Errorf("%s: the handler got no logger", cm.Name)
		}
		switch cm.Name {
		case "later":
			return time.Nanosecond, nil
		case "fails":
			return 0, errors.New("driver away")
		}
		return 0, nil
	}
	process := SyncCached(q, "configmap", get, handle)
	ctx := klog.NewContext(context.Background(), klog.Background())

	if err := process(ctx, "missing"); err != nil {
		t.Errorf("missing object: %v, want nil", err)
	}
	if err := process(ctx, "broken"); err == nil || !strings.Contains(err.Error(), "configmap broken") {
		t.Errorf("lister failure: %v, want an error naming configmap broken", err)
	}
	if err := process(ctx, "done"); err != nil {
		t.Errorf("done: %v", err)
	}
	if err := process(ctx, "fails"); err == nil {
		t.Error("handler failure: nil error, want the handler's")
	}
	if err := process(ctx, "later"); err != nil {
		t.Errorf("later: %v", err)
	}
	if strings.Join(handled, ",") != "done,fails,later" {
		t.Errorf("handled %v, want done,fails,later", handled)
	}
	// Only "later" asked to be seen again; a failed sync is retried by Run with backoff, not here.
	item, _ := q.Get()
	if item != "later" {
		t.Errorf("requeued %q, want later", item)
	}
	q.Done(item)
	if n := q.Len(); n != 0 {
		t.Errorf("%d more items queued, want none", n)
	}
}

func TestChangedBeyond(t *testing.T) {
	ignoreData := func(cm *corev1.ConfigMap) { delete(cm.Data, "error") }
	cm := func(rv string, data map[string]string, labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", ResourceVersion: rv, Labels: labels,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m" + rv}}}, Data: data}
	}
	for _, tc := range []struct {
		name     string
		old, cur *corev1.ConfigMap
		want     bool
	}{
		{"resync", cm("1", nil, nil), cm("1", nil, nil), true},
		{"only the ignored field", cm("1", nil, nil), cm("2", map[string]string{"error": "x"}, nil), false},
		{"another field", cm("1", nil, nil), cm("2", map[string]string{"error": "x", "other": "y"}, nil), true},
		{"metadata", cm("1", nil, nil), cm("2", nil, map[string]string{"a": "b"}), true},
	} {
		old, cur := tc.old.DeepCopy(), tc.cur.DeepCopy()
		if got := ChangedBeyond(tc.old, tc.cur, ignoreData); got != tc.want {
			t.Errorf("%s: ChangedBeyond = %v, want %v", tc.name, got, tc.want)
		}
		if tc.old.ResourceVersion != old.ResourceVersion || len(tc.cur.Data) != len(cur.Data) {
			t.Errorf("%s: ChangedBeyond changed the informer's objects", tc.name)
		}
	}
}
