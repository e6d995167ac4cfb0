// Package patch changes Kubernetes objects with one request each, safely against concurrent writers.
//
// Every helper computes a JSON merge patch (RFC 7386) from the object the caller read and the object it
// wants, and adds that object's metadata.resourceVersion to the patch. The API server applies the patch only
// if the object still has that version, and answers 409 Conflict otherwise, so a stale read can never
// re-add a finalizer someone removed or drop one someone added (the cause of upstream's "no new finalizers
// can be added if the object is being deleted" 422s and the snapshot-controller's conflict storms). A merge
// patch works for built-in types and custom resources alike, unlike strategic merge patch. When nothing
// changes, no request is sent. RetryOnConflict re-reads and retries after a Conflict.
//
// RemoveOwned is the one exception: it drops finalizers and annotations only the caller sets with a JSON patch
// that tests each entry it removes instead of the resourceVersion, for removals that follow a write which
// changes that version by design (see its documentation for why that is safe).
//
// The helpers are generic over the object type: pass the Patch method of a typed client
// (client.CoreV1().PersistentVolumes().Patch) or of a dynamic resource interface.
package patch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// Object is what the helpers patch: any Kubernetes object, typed or unstructured.
type Object interface {
	metav1.Object
	runtime.Object
}

// Func is the Patch method of a typed client or a dynamic resource interface.
type Func[T Object] func(ctx context.Context, name string, pt types.PatchType, data []byte,
	opts metav1.PatchOptions, subresources ...string) (T, error)

// Mutate applies mutate to a copy of obj and sends the difference as one merge patch preconditioned on obj's
// resourceVersion, to subresource if given ("status"). It returns the patched object, or obj itself and no
// request when mutate changed nothing.
func Mutate[T Object](ctx context.Context, patch Func[T], obj T, mutate func(T), subresource ...string) (T, error) {
	original, err := json.Marshal(obj)
	if err != nil {
		return obj, fmt.Errorf("encoding %s: %w", obj.GetName(), err)
	}
	changed, ok := obj.DeepCopyObject().(T)
	if !ok {
		return obj, fmt.Errorf("copying %s: DeepCopyObject returned another type", obj.GetName())
	}
	mutate(changed)
	modified, err := json.Marshal(changed)
	if err != nil {
		return obj, fmt.Errorf("encoding %s: %w", obj.GetName(), err)
	}
	diff, err := jsonpatch.CreateMergePatch(original, modified)
	if err != nil {
		return obj, fmt.Errorf("computing the patch for %s: %w", obj.GetName(), err)
	}
	var body map[string]any
	if err := json.Unmarshal(diff, &body); err != nil {
		return obj, fmt.Errorf("decoding the patch for %s: %w", obj.GetName(), err)
	}
	if len(body) == 0 {
		return obj, nil
	}
	rv := obj.GetResourceVersion()
	if rv == "" {
		return obj, fmt.Errorf("patching %s: the object has no metadata.resourceVersion to guard the patch with", obj.GetName())
	}
	md, _ := body["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		body["metadata"] = md
	}
	md["resourceVersion"] = rv
	data, err := json.Marshal(body)
	if err != nil {
		return obj, fmt.Errorf("encoding the patch for %s: %w", obj.GetName(), err)
	}
	return patch(ctx, obj.GetName(), types.MergePatchType, data, metav1.PatchOptions{}, subresource...)
}

// AddFinalizer adds finalizer to obj unless it is there already.
func AddFinalizer[T Object](ctx context.Context, patch Func[T], obj T, finalizer string) (T, error) {
	if slices.Contains(obj.GetFinalizers(), finalizer) {
		return obj, nil
	}
	return Mutate(ctx, patch, obj, func(o T) { o.SetFinalizers(append(o.GetFinalizers(), finalizer)) })
}

// RemoveFinalizer removes every occurrence of finalizer from obj.
func RemoveFinalizer[T Object](ctx context.Context, patch Func[T], obj T, finalizer string) (T, error) {
	if !slices.Contains(obj.GetFinalizers(), finalizer) {
		return obj, nil
	}
	return Mutate(ctx, patch, obj, func(o T) {
		o.SetFinalizers(slices.DeleteFunc(slices.Clone(o.GetFinalizers()), func(f string) bool { return f == finalizer }))
	})
}

// SetAnnotation sets annotation key to value.
func SetAnnotation[T Object](ctx context.Context, patch Func[T], obj T, key, value string) (T, error) {
	if v, ok := obj.GetAnnotations()[key]; ok && v == value {
		return obj, nil
	}
	return Mutate(ctx, patch, obj, func(o T) {
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[key] = value
		o.SetAnnotations(a)
	})
}

// RemoveAnnotation deletes annotation key.
func RemoveAnnotation[T Object](ctx context.Context, patch Func[T], obj T, key string) (T, error) {
	if _, ok := obj.GetAnnotations()[key]; !ok {
		return obj, nil
	}
	return Mutate(ctx, patch, obj, func(o T) {
		a := o.GetAnnotations()
		delete(a, key)
		o.SetAnnotations(a)
	})
}

// Status patches the status subresource with the changes mutate makes to a copy of obj.
func Status[T Object](ctx context.Context, patch Func[T], obj T, mutate func(T)) (T, error) {
	return Mutate(ctx, patch, obj, mutate, "status")
}

// RetryOnConflict runs do on obj (typically from an informer cache, so the first try costs no GET) and, each
// time the API server answers Conflict, re-reads the object with get and runs do again, with client-go's
// default retry backoff. Other errors are returned at once.
func RetryOnConflict[T Object](ctx context.Context, obj T, get func(context.Context) (T, error),
	do func(context.Context, T) (T, error)) (T, error) {
	current, result := obj, obj
	first := true
	err := retry.OnError(retry.DefaultRetry, apierrors.IsConflict, func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !first {
			fresh, err := get(ctx)
			if err != nil {
				return fmt.Errorf("re-reading %s after a conflict: %w", obj.GetName(), err)
			}
			current = fresh
		}
		first = false
		out, err := do(ctx, current)
		if err != nil {
			return err
		}
		result = out
		return nil
	})
	return result, err
}
