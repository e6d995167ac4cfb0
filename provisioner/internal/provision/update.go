package provision

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/shared/patch"
)

// Claims and VolumeSnapshots are written with Update, not Patch: upstream's RBAC (which a drop-in must work
// under) grants update and no patch on both. Every Update carries the resourceVersion of the copy the change was
// made to, so the API server answers 409 Conflict when the object changed since it was read, exactly as a
// resourceVersion-preconditioned patch would; the caller returns the error and the work queue retries the object
// from a newer copy. A stale copy therefore never overwrites a newer object.

// updateFunc is the Update method of a typed client.
type updateFunc[T patch.Object] func(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)

// updateObject applies mutate to a copy of obj and sends it as one Update guarded by obj's resourceVersion. It
// returns the updated object, or obj itself and no request when mutate changed nothing.
func updateObject[T patch.Object](ctx context.Context, update updateFunc[T], obj T, mutate func(T)) (T, error) {
	changed, ok := obj.DeepCopyObject().(T)
	if !ok {
		return obj, fmt.Errorf("copying %s: DeepCopyObject returned another type", obj.GetName())
	}
	mutate(changed)
	if apiequality.Semantic.DeepEqual(obj, changed) {
		return obj, nil
	}
	// An Update without a resourceVersion is unconditional: it would overwrite whatever the server has.
	if obj.GetResourceVersion() == "" {
		return obj, fmt.Errorf("updating %s: the object has no metadata.resourceVersion to guard the update with", obj.GetName())
	}
	return update(ctx, changed, metav1.UpdateOptions{})
}
