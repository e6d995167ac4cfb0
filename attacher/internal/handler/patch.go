package handler

import (
	"encoding/json"
	"fmt"
	"slices"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// addMetadataPatch is a JSON merge patch that adds finalizer and sets annotations on obj. It carries
// obj's resourceVersion, so the server rejects it with a conflict if obj changed since we read it: a
// merge patch replaces the whole finalizer list, and a stale list must not undo someone else's change.
func addMetadataPatch(obj metav1.Object, finalizer string, annotations map[string]string) ([]byte, error) {
	meta := map[string]any{"resourceVersion": obj.GetResourceVersion()}
	if !slices.Contains(obj.GetFinalizers(), finalizer) {
		meta["finalizers"] = append(slices.Clone(obj.GetFinalizers()), finalizer)
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	return json.Marshal(map[string]any{"metadata": meta})
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// removeFinalizerPatch is an RFC 6902 patch that removes finalizer from obj, guarded by a test that the
// finalizer is still at the index we saw: no resourceVersion precondition is needed, so unrelated
// changes to obj (an annotation, a status) do not make it fail.
func removeFinalizerPatch(obj metav1.Object, finalizer string) ([]byte, error) {
	i := slices.Index(obj.GetFinalizers(), finalizer)
	if i < 0 {
		return nil, fmt.Errorf("%s has no finalizer %s", obj.GetName(), finalizer)
	}
	path := fmt.Sprintf("/metadata/finalizers/%d", i)
	return json.Marshal([]jsonPatchOp{
		{Op: "test", Path: path, Value: finalizer},
		{Op: "remove", Path: path},
	})
}

// attachedStatusPatch marks a VolumeAttachment attached with the driver's publish context, clearing any
// attach error. Keys of an old attachmentMetadata that the new one lacks are removed explicitly, since
// a merge patch merges maps.
func attachedStatusPatch(va *storagev1.VolumeAttachment, publishContext map[string]string) ([]byte, error) {
	metadata := map[string]any{}
	for k := range va.Status.AttachmentMetadata {
		metadata[k] = nil
	}
	for k, v := range publishContext {
		metadata[k] = v
	}
	st := map[string]any{"attached": true, "attachError": nil}
	if len(metadata) > 0 {
		st["attachmentMetadata"] = metadata
	}
	return json.Marshal(map[string]any{"status": st})
}

// errorStatusPatch sets status.attachError or status.detachError.
func errorStatusPatch(field string, volErr *storagev1.VolumeError) ([]byte, error) {
	return json.Marshal(map[string]any{"status": map[string]any{field: volErr}})
}
