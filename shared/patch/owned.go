package patch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Owned names finalizers and annotation keys that only the caller ever sets on an object: its own hold on the
// object and its own bookkeeping, which RemoveOwned may remove without a resourceVersion precondition.
type Owned struct {
	Finalizers  []string
	Annotations []string
}

// RemoveOwned removes the owned finalizers and annotations that obj has, with one JSON patch (RFC 6902) that
// is not preconditioned on obj's resourceVersion, and returns the object as the server has it then. When obj
// has none of them, no request is sent and obj is returned.
//
// Why not the resourceVersion precondition of the other helpers: a caller often removes its hold right after a
// write that changes the object's version by design (its own Delete of the object, or a write the caller knows
// another controller makes at that moment, such as the PV controller binding a claim the moment its PV is
// created). Preconditioned on the version in hand, that removal would fail with 409 nearly every time and cost
// a re-read and a second write, or a GET before every removal.
//
// Why it is still safe: the patch tests every entry it removes at the position and with the value obj shows
// (the finalizer list slot holds that finalizer; the annotation has that value) before removing it. If a
// concurrent writer moved the slot or changed the value, the test fails and nothing is removed (the API
// server answers 422 Invalid; re-read and call again), so the patch can never remove an entry it did not see,
// such as another controller's finalizer that slid into the slot. What the test cannot see is an entry
// removed and then set again with the same value since obj was read; for an entry only the caller sets, that
// is the caller's own write, and removing it is what the caller asks for. That is why it takes Owned entries
// only: for finalizers or annotations other writers set, use RemoveFinalizer or RemoveAnnotation.
//
// Every occurrence of an owned finalizer is removed, as RemoveFinalizer does.
func RemoveOwned[T Object](ctx context.Context, patch Func[T], obj T, owned Owned, subresource ...string) (T, error) {
	ops := removeOwnedOps(obj, owned)
	if len(ops) == 0 {
		return obj, nil
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return obj, fmt.Errorf("encoding the patch for %s: %w", obj.GetName(), err)
	}
	return patch(ctx, obj.GetName(), types.JSONPatchType, data, metav1.PatchOptions{}, subresource...)
}

// jsonPatchOp is one RFC 6902 operation. Value is a pointer so that a test of the empty string still carries
// "value" (omitempty would drop it and the test would compare against nothing).
type jsonPatchOp struct {
	Op    string  `json:"op"`
	Path  string  `json:"path"`
	Value *string `json:"value,omitempty"`
}

// removeOwnedOps returns a test and a remove for every owned entry obj has. Finalizer slots are removed from
// the highest index down, so each removal leaves the indexes of the slots still to be tested in place.
func removeOwnedOps(obj metav1.Object, owned Owned) []jsonPatchOp {
	var ops []jsonPatchOp
	fins := obj.GetFinalizers()
	for i := len(fins) - 1; i >= 0; i-- {
		if !slices.Contains(owned.Finalizers, fins[i]) {
			continue
		}
		path := pointer("metadata", "finalizers", strconv.Itoa(i))
		ops = append(ops, jsonPatchOp{Op: "test", Path: path, Value: &fins[i]}, jsonPatchOp{Op: "remove", Path: path})
	}
	annotations := obj.GetAnnotations()
	seen := map[string]bool{}
	for _, k := range owned.Annotations {
		v, ok := annotations[k]
		if !ok || seen[k] {
			continue
		}
		seen[k] = true
		path := pointer("metadata", "annotations", k)
		ops = append(ops, jsonPatchOp{Op: "test", Path: path, Value: &v}, jsonPatchOp{Op: "remove", Path: path})
	}
	return ops
}

// pointer joins reference tokens (map keys, list indexes) into a JSON pointer, escaping each as RFC 6901
// says: "~" as "~0" and "/" as "~1", in one pass so that the "~" of "~1" is not escaped again.
func pointer(tokens ...string) string {
	escape := strings.NewReplacer("~", "~0", "/", "~1")
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escape.Replace(t))
	}
	return b.String()
}
