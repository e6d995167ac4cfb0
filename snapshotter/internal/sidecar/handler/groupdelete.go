package handler

import (
	"context"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// delete finishes a released group content: with policy Delete it deletes the group snapshot (and with it
// the members' snapshots), then removes the group bound-protection finalizer. A group whose
// CreateVolumeGroupSnapshot may still be running is asked for again under the same name first, so it cannot
// leak (see Handler.delete).
func (h *GroupHandler) delete(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent) error {
	if !slices.Contains(gc.Finalizers, snapapi.GroupContentBoundFinalizer) {
		return nil
	}
	if gc.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete {
		handle, ids := groupHandles(gc)
		if handle == "" {
			if _, creating := gc.Annotations[snapapi.AnnGroupBeingCreated]; creating {
				group, err := h.createdMeanwhile(ctx, gc)
				if err != nil {
					h.cfg.Events.Event(gc, corev1.EventTypeWarning, ReasonGroupDeleteError, "Failed to delete group snapshot: "+err.Error())
					return err
				}
				handle = group.GetGroupSnapshotId()
				for _, s := range group.GetSnapshots() {
					ids = append(ids, s.GetSnapshotId())
				}
			}
		}
		if handle != "" {
			if err := h.deleteGroup(ctx, gc, handle, ids); err != nil {
				h.cfg.Events.Event(gc, corev1.EventTypeWarning, ReasonGroupDeleteError, "Failed to delete group snapshot: "+err.Error())
				return err
			}
			klog.FromContext(ctx).V(2).Info("Group snapshot deleted", "groupSnapshotHandle", handle, "members", len(ids))
		}
	}
	return h.release(ctx, gc)
}

// groupHandles are the group's handle and its members' snapshot handles, from the status, else from a
// pre-provisioned spec.
func groupHandles(gc *groupv1.VolumeGroupSnapshotContent) (string, []string) {
	if s := gc.Status; s != nil && s.VolumeGroupSnapshotHandle != nil && *s.VolumeGroupSnapshotHandle != "" {
		var ids []string
		for _, m := range s.VolumeSnapshotInfoList {
			ids = append(ids, m.SnapshotHandle)
		}
		if len(ids) == 0 && gc.Spec.Source.GroupSnapshotHandles != nil {
			ids = slices.Clone(gc.Spec.Source.GroupSnapshotHandles.VolumeSnapshotHandles)
		}
		return *s.VolumeGroupSnapshotHandle, ids
	}
	if h := gc.Spec.Source.GroupSnapshotHandles; h != nil {
		return h.VolumeGroupSnapshotHandle, slices.Clone(h.VolumeSnapshotHandles)
	}
	return "", nil
}

// createdMeanwhile asks for the group an interrupted CreateVolumeGroupSnapshot may have made, under the same
// name; a final error means there is none (an empty group).
func (h *GroupHandler) createdMeanwhile(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent) (*csi.VolumeGroupSnapshot, error) {
	req, err := h.createRequest(ctx, gc)
	if err != nil {
		return nil, fmt.Errorf("learning the group snapshot of an interrupted CreateVolumeGroupSnapshot: %w", err)
	}
	group, err := h.cfg.CSI.CreateGroup(ctx, req)
	if err != nil {
		if csiconn.IsFinal(err) {
			klog.FromContext(ctx).V(2).Info("Interrupted CreateVolumeGroupSnapshot made no group", "name", req.Name, "err", err)
			return &csi.VolumeGroupSnapshot{}, nil
		}
		return nil, fmt.Errorf("CreateVolumeGroupSnapshot %q, to learn the group an interrupted call made: %w", req.Name, err)
	}
	return group, nil
}

func (h *GroupHandler) deleteGroup(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent, handle string, ids []string) error {
	secrets, err := h.credentials(ctx, gc)
	if err != nil {
		return err
	}
	if err := h.cfg.CSI.DeleteGroup(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: handle, SnapshotIds: ids, Secrets: secrets}); err != nil {
		return fmt.Errorf("DeleteVolumeGroupSnapshot %s of volumegroupsnapshotcontent %s: %w", handle, gc.Name, err)
	}
	return nil
}

// release removes the group bound-protection finalizer and a leftover being-created annotation.
func (h *GroupHandler) release(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent) error {
	contents := h.cfg.Client.GroupsnapshotV1().VolumeGroupSnapshotContents()
	return release(ctx, h.tracker, gc, h.getter(gc.Name), contents.Patch, "volumegroupsnapshotcontent", snapapi.GroupContentBoundFinalizer, snapapi.AnnGroupBeingCreated)
}
