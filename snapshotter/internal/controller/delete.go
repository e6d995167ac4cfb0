package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stowage-csi/stowage/shared/patch"
	"github.com/stowage-csi/stowage/snapshotter/internal/controller/opmetrics"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// deleteSnapshot handles a VolumeSnapshot being deleted. Unless a claim is being restored from it, its bound
// content is marked volumesnapshot-being-deleted (so csi-snapshotter deletes the snapshot behind it) and, with
// policy Delete, deleted; the snapshot's finalizers go once its content is gone (policy Delete) or at once
// (Retain, no content), so the VolumeSnapshot stays visible until the storage snapshot is really gone.
func (c *Controller) deleteSnapshot(ctx context.Context, vs *snapv1.VolumeSnapshot) error {
	c.cfg.Metrics.Start(opmetrics.DeleteSnapshot, vs.UID, c.driverOf(vs), snapshotType(vs))
	if !slices.Contains(vs.Finalizers, snapapi.SnapshotAsSourceFinalizer) && !slices.Contains(vs.Finalizers, snapapi.SnapshotBoundFinalizer) &&
		!slices.Contains(vs.Finalizers, snapapi.SnapshotInGroupFinalizer) {
		return nil
	}
	if c.memberDeletionBlocked(vs) {
		msg := fmt.Sprintf("deletion of the individual volume snapshot %s/%s is not allowed as it belongs to group snapshot %s. Deleting the group snapshot will trigger the deletion of all the individual volume snapshots that are part of the group.",
			vs.Namespace, vs.Name, groupOwner(vs))
		c.cfg.Events.Event(vs, v1.EventTypeWarning, "SnapshotDeletePending", msg)
		return errors.New(msg)
	}
	content, err := c.boundContent(vs)
	if err != nil {
		return err
	}
	deleteContent := content != nil && content.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete
	if content != nil {
		inUse, err := c.restoring(vs)
		if err != nil {
			return err
		}
		if inUse {
			c.cfg.Events.Event(vs, v1.EventTypeWarning, "SnapshotDeletePending", "Snapshot is being used to restore a PVC")
			return fmt.Errorf("snapshot %s/%s is in use (being used to restore a PVC), will retry deletion", vs.Namespace, vs.Name)
		}
		if content, err = c.markBeingDeleted(ctx, content); err != nil {
			return err
		}
	}
	if deleteContent && content.DeletionTimestamp == nil && !c.contentsDeleted.IsGone(content.Name, content) {
		uid := content.UID
		err := c.cfg.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, content.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			c.cfg.Events.Event(vs, v1.EventTypeWarning, "SnapshotContentObjectDeleteError", "Failed to delete snapshot content API object")
			return fmt.Errorf("failed to delete VolumeSnapshotContent %s from API server: %w", content.Name, err)
		}
		c.contentsDeleted.Deleted(content.Name, uid)
	}
	if err := c.releaseClaim(ctx, vs, true); err != nil {
		c.cfg.Events.Event(vs, v1.EventTypeWarning, "ErrorPVCFinalizer", "Error check and remove PVC Finalizer for VolumeSnapshot")
		return err
	}
	if deleteContent {
		// The snapshot keeps all its finalizers until the content is gone, and then loses them in one patch
		// (the content's removal queues it): upstream drops the as-source finalizer here in a write of its own,
		// the fourth write per deleted snapshot, which at --kube-api-qps=5 is a quarter of a delete storm's time.
		return nil
	}
	drop := []string{snapapi.SnapshotAsSourceFinalizer, snapapi.SnapshotInGroupFinalizer, snapapi.SnapshotBoundFinalizer}
	updated, err := patch.RetryOnConflict(ctx, vs, c.getSnapshot(vs), func(ctx context.Context, vs *snapv1.VolumeSnapshot) (*snapv1.VolumeSnapshot, error) {
		return patch.Mutate(ctx, c.snapshotPatch(vs.Namespace), vs, func(vs *snapv1.VolumeSnapshot) {
			vs.Finalizers = slices.DeleteFunc(slices.Clone(vs.Finalizers), func(f string) bool { return slices.Contains(drop, f) })
		})
	})
	if apierrors.IsNotFound(err) {
		return nil // gone already: what the removal was for
	}
	if err != nil {
		return fmt.Errorf("removing finalizers of volumesnapshot %s/%s: %w", vs.Namespace, vs.Name, err)
	}
	if len(updated.Finalizers) == 0 {
		c.snapshotsWritten.Deleted(vs.Namespace+"/"+vs.Name, vs.UID)
	}
	return nil
}

// boundContent is the content bound to vs both ways, nil if there is none (never bound, gone, or another
// snapshot's).
func (c *Controller) boundContent(vs *snapv1.VolumeSnapshot) (*snapv1.VolumeSnapshotContent, error) {
	var name string
	switch {
	case isBound(vs):
		name = *vs.Status.BoundVolumeSnapshotContentName
	case vs.Spec.Source.PersistentVolumeClaimName != nil:
		name = dynamicContentName(vs)
	default:
		return nil, nil
	}
	return referringBack(name, c.content, func(content *snapv1.VolumeSnapshotContent) bool { return refersTo(content, vs) })
}

// referringBack reads the named content (or group content) with get and returns it if it refers back to the
// snapshot, as refersBack tells; nil if it does not or is gone.
func referringBack[T any](name string, get func(string) (T, error), refersBack func(T) bool) (T, error) {
	var none T
	obj, err := get(name)
	if apierrors.IsNotFound(err) {
		return none, nil
	}
	if err != nil || !refersBack(obj) {
		return none, err
	}
	return obj, nil
}

// markBeingDeleted sets volumesnapshot-being-deleted on content: csi-snapshotter deletes the storage snapshot
// only of a content so marked (or one deleted by a user). The merge patch sets that one key and nothing else,
// so it needs no resourceVersion precondition: csi-snapshotter writes the same content at the same time (its
// being-created annotation, its status), and a version precondition would only turn that into 409s. The UID
// precondition keeps it off a content recreated under the same name. (Upstream replaces the whole annotation
// map without any precondition, which can drop csi-snapshotter's annotation.)
func (c *Controller) markBeingDeleted(ctx context.Context, content *snapv1.VolumeSnapshotContent) (*snapv1.VolumeSnapshotContent, error) {
	return annotateOnce(ctx, content, "VolumeSnapshotContent", snapapi.AnnBeingDeleted, c.contentPatch())
}

// annotateOnce sets annotation key to "yes" on obj unless it is there, with a merge patch of that one key under
// a UID precondition (see markBeingDeleted), and returns the object as written.
func annotateOnce[T patch.Object](ctx context.Context, obj T, kind, key string, p patch.Func[T]) (T, error) {
	if _, ok := obj.GetAnnotations()[key]; ok {
		return obj, nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": obj.GetUID(), "annotations": map[string]string{key: "yes"},
	}})
	if err != nil {
		return obj, err
	}
	updated, err := p(ctx, obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil {
		return obj, fmt.Errorf("annotating %s %s %s: %w", kind, obj.GetName(), key, err)
	}
	return updated, nil
}
