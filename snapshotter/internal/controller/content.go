package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/stowage-csi/stowage/shared/patch"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// syncContent keeps a bound content's finalizer and, when its snapshot is being deleted, marks it
// volumesnapshot-being-deleted. An unbound content (no volumeSnapshotRef.uid) is left alone: it waits for a
// VolumeSnapshot to claim it.
func (c *Controller) syncContent(ctx context.Context, content *snapv1.VolumeSnapshotContent) error {
	src := content.Spec.Source
	if (src.VolumeHandle == nil) == (src.SnapshotHandle == nil) {
		//lint:ignore ST1005 upstream's message, which users and tools match
		err := errors.New("Exactly one of VolumeHandle and SnapshotHandle should be specified")
		c.cfg.Events.Event(content, v1.EventTypeWarning, "ContentValidationError", err.Error())
		return fmt.Errorf("volumesnapshotcontent %s spec.source: %w", content.Name, err)
	}
	ref := content.Spec.VolumeSnapshotRef
	if ref.UID == "" {
		return nil
	}
	if content.DeletionTimestamp == nil && !slices.Contains(content.Finalizers, snapapi.ContentBoundFinalizer) {
		_, err := patch.RetryOnConflict(ctx, content, c.getContent(content), func(ctx context.Context, content *snapv1.VolumeSnapshotContent) (*snapv1.VolumeSnapshotContent, error) {
			if content.DeletionTimestamp != nil {
				return content, nil
			}
			return patch.AddFinalizer(ctx, c.contentPatch(), content, snapapi.ContentBoundFinalizer)
		})
		if err != nil {
			return fmt.Errorf("adding %s to volumesnapshotcontent %s: %w", snapapi.ContentBoundFinalizer, content.Name, err)
		}
		return nil
	}
	vs, err := c.snapshots.VolumeSnapshots(ref.Namespace).Get(ref.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	vs = c.snapshotsWritten.Of(ref.Namespace+"/"+ref.Name, vs)
	if vs.UID != ref.UID || vs.DeletionTimestamp == nil ||
		(!slices.Contains(vs.Finalizers, snapapi.SnapshotAsSourceFinalizer) && !slices.Contains(vs.Finalizers, snapapi.SnapshotBoundFinalizer)) {
		return nil
	}
	_, err = c.markBeingDeleted(ctx, content)
	return err
}
