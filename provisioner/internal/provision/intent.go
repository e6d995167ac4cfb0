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

	"github.com/stowage-csi/stowage/shared/patch"
)

// Most writes go through shared/patch: one merge patch preconditioned on the resourceVersion the caller read.
// Two removals are kept here as RFC 6902 JSON patches that "test" the exact list slot and annotation value
// they remove, because shared/patch can only precondition on the whole object's resourceVersion, and these
// two follow a write that changes that version by design:
//   - releasing the intent follows the PV create, on which the PV controller binds the claim (an Update of
//     the claim) at about the same moment;
//   - dropping the PV finalizer follows our own Delete of the PV, which changes its resourceVersion, and the
//     cached copy in hand predates it.
//
// A resourceVersion precondition would fail there with 409 and cost a re-read and a second write (or a GET
// per PV); the slot test still fails instead of removing anything it did not see, and keeps each at one request.
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

// removeFinalizerOps removes finalizer f from meta; nil if it is not there.
func removeFinalizerOps(meta *metav1.ObjectMeta, f string) []patchOp {
	i := slices.Index(meta.Finalizers, f)
	if i < 0 {
		return nil
	}
	path := pointer("metadata", "finalizers", strconv.Itoa(i))
	return []patchOp{{Op: "test", Path: path, Value: f}, {Op: "remove", Path: path}}
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
// the claim until the provisioner has finished or undone the job, the annotation says which volume. The patch is
// preconditioned on the claim's resourceVersion, so it is never written from a copy older than what the
// provisioner last saw (the claim is only ours once the PV controller's annotation is in that copy).
func (p *Provisioner) recordIntent(ctx context.Context, claim *v1.PersistentVolumeClaim, volName string) (*v1.PersistentVolumeClaim, error) {
	return p.mutateClaim(ctx, claim, func(c *v1.PersistentVolumeClaim) {
		if !slices.Contains(c.Finalizers, IntentKey) {
			c.Finalizers = append(c.Finalizers, IntentKey)
		}
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, IntentKey, volName)
	})
}

// mutateClaim writes the changes mutate makes to a copy of claim as one merge patch preconditioned on the claim's
// resourceVersion (shared/patch), and returns the claim as the server has it now.
func (p *Provisioner) mutateClaim(ctx context.Context, claim *v1.PersistentVolumeClaim, mutate func(*v1.PersistentVolumeClaim)) (*v1.PersistentVolumeClaim, error) {
	out, err := patch.Mutate(ctx, p.Kube.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch, claim, mutate)
	if err != nil {
		return nil, fmt.Errorf("patch PVC %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return out, nil
}

// releaseIntentOps drops the intent finalizer and annotation.
func releaseIntentOps(claim *v1.PersistentVolumeClaim) []patchOp {
	return append(removeFinalizerOps(&claim.ObjectMeta, IntentKey), removeAnnotationOps(&claim.ObjectMeta, IntentKey)...)
}
