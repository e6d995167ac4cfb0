package handler

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/ownwrites"
	"github.com/stowage-csi/stowage/shared/patch"
)

// release is the last step of deleting a content or a group content: it removes csi-snapshotter's
// bound-protection finalizer and a leftover being-created annotation in one patch preconditioned on the
// version in hand, re-reading with get after a conflict. kind names the object in errors and logs.
func release[T patch.Object](ctx context.Context, tracker *ownwrites.Writes, obj T, get func(context.Context) (T, error),
	patchFn patch.Func[T], kind, finalizer, annotation string) error {
	_, err := ownwrites.Retry(ctx, tracker, obj, get, func(ctx context.Context, cur T) (T, error) {
		out, err := patch.Mutate(ctx, patchFn, cur, func(v T) {
			v.SetFinalizers(slices.DeleteFunc(slices.Clone(v.GetFinalizers()), func(f string) bool { return f == finalizer }))
			delete(v.GetAnnotations(), annotation)
		})
		if err == nil && cur.GetDeletionTimestamp() != nil {
			// Removing the last finalizer of a deleted object deletes it, and the answer may carry the version
			// it replaced: marked here, so a sync of the cached copy before this write waits instead of deleting
			// the snapshot a second time.
			tracker.Superseded(cur.GetUID(), cur.GetResourceVersion())
		}
		return out, err
	})
	if err != nil {
		return fmt.Errorf("%s %s: removing finalizer %s: %w", kind, obj.GetName(), finalizer, err)
	}
	klog.FromContext(ctx).V(2).Info("Released "+kind, "finalizer", finalizer)
	return nil
}
