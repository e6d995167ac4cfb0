package provision

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// patchOp is one RFC 6902 operation. Finalizer changes use JSON patch with a "test" of the exact list slot, so one
// request changes exactly what we saw and fails instead of clobbering a concurrent writer (the 422s of upstream's
// stale merge patches, external-provisioner#1217).
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// pointer escapes a map key or list index for a JSON pointer.
func pointer(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(p))
	}
	return b.String()
}

// addFinalizerOps adds finalizer f to meta.
func addFinalizerOps(meta *metav1.ObjectMeta, f string) []patchOp {
	if len(meta.Finalizers) == 0 {
		// Creating the list replaces whatever is there, so only if nothing changed since we read it.
		return []patchOp{
			{Op: "test", Path: "/metadata/resourceVersion", Value: meta.ResourceVersion},
			{Op: "add", Path: "/metadata/finalizers", Value: []string{f}},
		}
	}
	return []patchOp{{Op: "add", Path: "/metadata/finalizers/-", Value: f}}
}

// removeFinalizerOps removes finalizer f from meta; nil if it is not there.
func removeFinalizerOps(meta *metav1.ObjectMeta, f string) []patchOp {
	i := slices.Index(meta.Finalizers, f)
	if i < 0 {
		return nil
	}
	path := pointer("metadata", "finalizers", strconv.Itoa(i))
	return []patchOp{{Op: "test", Path: path, Value: f}, {Op: "remove", Path: path}}
}

// setAnnotationOps sets annotation k=v on meta.
func setAnnotationOps(meta *metav1.ObjectMeta, k, v string) []patchOp {
	if meta.Annotations == nil {
		return []patchOp{{Op: "add", Path: "/metadata/annotations", Value: map[string]string{k: v}}}
	}
	return []patchOp{{Op: "add", Path: pointer("metadata", "annotations", k), Value: v}}
}

// removeAnnotationOps removes annotation k if meta has it, checking its value first.
func removeAnnotationOps(meta *metav1.ObjectMeta, k string) []patchOp {
	v, ok := meta.Annotations[k]
	if !ok {
		return nil
	}
	path := pointer("metadata", "annotations", k)
	return []patchOp{{Op: "test", Path: path, Value: v}, {Op: "remove", Path: path}}
}

func marshalPatch(ops []patchOp) ([]byte, error) {
	b, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encode patch: %w", err)
	}
	return b, nil
}

// patchClaim applies ops to claim in one request and returns the claim as the server has it now.
func (p *Provisioner) patchClaim(ctx context.Context, claim *v1.PersistentVolumeClaim, ops []patchOp) (*v1.PersistentVolumeClaim, error) {
	if len(ops) == 0 {
		return claim, nil
	}
	body, err := marshalPatch(ops)
	if err != nil {
		return nil, err
	}
	out, err := p.Kube.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch(ctx, claim.Name, types.JSONPatchType, body, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("patch PVC %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return out, nil
}

// hasIntent reports whether the claim carries the persisted "volume may exist" state.
func hasIntent(claim *v1.PersistentVolumeClaim) bool {
	return slices.Contains(claim.Finalizers, IntentKey)
}

// recordIntent persists, in one patch, that a volume named volName may be created for claim: the finalizer keeps
// the claim until the provisioner has finished or undone the job, the annotation says which volume.
func (p *Provisioner) recordIntent(ctx context.Context, claim *v1.PersistentVolumeClaim, volName string) (*v1.PersistentVolumeClaim, error) {
	ops := append(addFinalizerOps(&claim.ObjectMeta, IntentKey), setAnnotationOps(&claim.ObjectMeta, IntentKey, volName)...)
	return p.patchClaim(ctx, claim, ops)
}

// releaseIntentOps drops the intent finalizer and annotation.
func releaseIntentOps(claim *v1.PersistentVolumeClaim) []patchOp {
	return append(removeFinalizerOps(&claim.ObjectMeta, IntentKey), removeAnnotationOps(&claim.ObjectMeta, IntentKey)...)
}
