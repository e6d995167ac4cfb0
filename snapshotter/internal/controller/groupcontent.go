package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/stowage-csi/stowage/shared/patch"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// syncGroupContent validates a group content and keeps a bound one's finalizer. An unbound content (no
// volumeGroupSnapshotRef.uid) waits for a VolumeGroupSnapshot to claim it; the group snapshot's status is
// brought in step by its own queue, which every change of the content reaches (groupContentChanged).
func (c *Controller) syncGroupContent(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent) error {
	src := gc.Spec.Source
	if (src.GroupSnapshotHandles == nil) == (len(src.VolumeHandles) == 0) {
		//lint:ignore ST1005 upstream's message, which users and tools match
		err := errors.New("Exactly one of GroupSnapshotHandles and VolumeHandles should be specified")
		c.cfg.Events.Event(gc, v1.EventTypeWarning, "GroupContentValidationError", err.Error())
		return fmt.Errorf("volumegroupsnapshotcontent %s spec.source: %w", gc.Name, err)
	}
	if gc.Spec.VolumeGroupSnapshotRef.UID == "" || gc.DeletionTimestamp != nil || slices.Contains(gc.Finalizers, snapapi.GroupContentBoundFinalizer) {
		return nil
	}
	_, err := patch.RetryOnConflict(ctx, gc, c.getGroupContent(gc), func(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent) (*groupv1.VolumeGroupSnapshotContent, error) {
		if gc.DeletionTimestamp != nil {
			return gc, nil
		}
		return patch.AddFinalizer(ctx, c.groupContentPatch(), gc, snapapi.GroupContentBoundFinalizer)
	})
	if err != nil {
		return fmt.Errorf("adding %s to volumegroupsnapshotcontent %s: %w", snapapi.GroupContentBoundFinalizer, gc.Name, err)
	}
	return nil
}
