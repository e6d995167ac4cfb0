package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/shared/patch"
	"github.com/stowage-csi/stowage/snapshotter/internal/controller/opmetrics"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// deleteGroupSnapshot handles a VolumeGroupSnapshot being deleted, as upstream: unless a claim is being
// restored from one of its members, its bound content is marked volumegroupsnapshot-being-deleted (so
// csi-snapshotter deletes the group snapshot behind it) and, with policy Delete, deleted; the members are
// deleted; the bound finalizer goes once the content is gone (Delete) or at once (Retain, or no content).
func (c *Controller) deleteGroupSnapshot(ctx context.Context, gs *groupv1.VolumeGroupSnapshot) error {
	c.cfg.Metrics.Start(opmetrics.DeleteGroupSnapshot, gs.UID, c.groupDriverOf(gs, nil), groupSnapshotType(gs))
	if !slices.Contains(gs.Finalizers, snapapi.GroupSnapshotBoundFinalizer) {
		return nil
	}
	gc, err := c.boundGroupContent(gs)
	if err != nil {
		return err
	}
	members, err := c.groupMembers(gs)
	if err != nil {
		return err
	}
	for _, vs := range members {
		inUse, err := c.restoring(vs)
		if err != nil {
			return err
		}
		if inUse {
			msg := fmt.Sprintf("Snapshot %s/%s belonging to VolumeGroupSnapshot %s/%s is being used to restore a PVC", vs.Namespace, vs.Name, gs.Namespace, gs.Name)
			c.cfg.Events.Event(gs, v1.EventTypeWarning, "SnapshotDeletePending", msg)
			return errors.New(msg) // retried with backoff; the claim's binding also requeues the member
		}
	}
	deleteContent := gc != nil && gc.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete
	if gc != nil {
		if gc, err = c.markGroupBeingDeleted(ctx, gc); err != nil {
			return err
		}
	}
	if deleteContent && gc.DeletionTimestamp == nil {
		uid := gc.UID
		err := c.cfg.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Delete(ctx, gc.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			c.cfg.Events.Event(gs, v1.EventTypeWarning, "GroupSnapshotContentObjectDeleteError", "Failed to delete group snapshot content API object")
			return fmt.Errorf("failed to delete VolumeGroupSnapshotContent %s from API server: %w", gc.Name, err)
		}
	}
	for _, vs := range members {
		if vs.DeletionTimestamp != nil {
			continue
		}
		uid := vs.UID
		err := c.cfg.Snap.SnapshotV1().VolumeSnapshots(vs.Namespace).Delete(ctx, vs.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			msg := fmt.Sprintf("failed to delete snapshot API object %s/%s part of group snapshot %s/%s: %v", vs.Namespace, vs.Name, gs.Namespace, gs.Name, err)
			c.cfg.Events.Event(gs, v1.EventTypeWarning, "SnapshotDeleteError", msg)
			return errors.New(msg)
		}
	}
	if deleteContent {
		return nil // the finalizer goes when the content does (groupContentDeleted requeues this group)
	}
	_, err = patch.RetryOnConflict(ctx, gs, c.getGroupSnapshot(gs), func(ctx context.Context, gs *groupv1.VolumeGroupSnapshot) (*groupv1.VolumeGroupSnapshot, error) {
		return patch.RemoveFinalizer(ctx, c.groupSnapshotPatch(gs.Namespace), gs, snapapi.GroupSnapshotBoundFinalizer)
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing %s from volumegroupsnapshot %s/%s: %w", snapapi.GroupSnapshotBoundFinalizer, gs.Namespace, gs.Name, err)
	}
	return nil
}

// boundGroupContent is the group content bound to gs both ways, nil if there is none.
func (c *Controller) boundGroupContent(gs *groupv1.VolumeGroupSnapshot) (*groupv1.VolumeGroupSnapshotContent, error) {
	var name string
	switch {
	case isGroupBound(gs):
		name = *gs.Status.BoundVolumeGroupSnapshotContentName
	case gs.Spec.Source.VolumeGroupSnapshotContentName == nil:
		name = dynamicGroupContentName(gs)
	default:
		return nil, nil
	}
	return referringBack(name, c.groupContent, func(gc *groupv1.VolumeGroupSnapshotContent) bool { return groupRefersTo(gc, gs) })
}

// markGroupBeingDeleted sets volumegroupsnapshot-being-deleted on gc, with a merge patch of that one key under
// a UID precondition, for the reasons markBeingDeleted gives.
func (c *Controller) markGroupBeingDeleted(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent) (*groupv1.VolumeGroupSnapshotContent, error) {
	return annotateOnce(ctx, gc, "VolumeGroupSnapshotContent", snapapi.AnnGroupBeingDeleted, c.groupContentPatch())
}
