package workqueue

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// SyncCached returns the process function of a controller whose queue holds object names: it reads the named
// object from the informer cache with get, hands it to handle with a logger naming it under kind (the
// lowercase kind, "volumeattachment"), and queues the name again after the delay handle asks for (none for 0).
// An object no longer in the cache is done with: its deletion event has told the handler.
func SyncCached[O any](q Queue[string], kind string, get func(name string) (O, error),
	handle func(context.Context, O) (time.Duration, error)) func(context.Context, string) error {
	return func(ctx context.Context, name string) error {
		obj, err := get(name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", kind, name, err)
		}
		ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues(kind, name))
		again, err := handle(ctx, obj)
		if err != nil {
			return err
		}
		if again > 0 {
			q.AddAfter(name, again)
		}
		return nil
	}
}

// ChangedBeyond reports whether an informer update from old to cur changed more than what ignore clears (the
// controller's own error writes, whose events would otherwise retry at once instead of after the backoff).
// ignore gets deep copies. A resync (the same resourceVersion) always counts as a change, so that periodic
// resyncs still reach the handler.
func ChangedBeyond[T interface {
	metav1.Object
	DeepCopy() T
}](old, cur T, ignore func(T)) bool {
	if old.GetResourceVersion() == cur.GetResourceVersion() {
		return true
	}
	a, b := old.DeepCopy(), cur.DeepCopy()
	for _, x := range []T{a, b} {
		x.SetResourceVersion("")
		x.SetManagedFields(nil)
		ignore(x)
	}
	return !equality.Semantic.DeepEqual(a, b)
}
