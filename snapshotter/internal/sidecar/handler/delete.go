package handler

import (
	"context"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// delete finishes a released content: with policy Delete it deletes the snapshot, then it removes the
// bound-protection finalizer, which csi-snapshotter removes and the snapshot controller adds (upstream's
// split). A group member's snapshot is the group's to delete. Upstream clears the status in a write of its
// own between the two; here the finalizer and the being-created annotation go in one patch, and a crash
// before it only repeats an idempotent DeleteSnapshot.
func (h *Handler) delete(ctx context.Context, c *snapv1.VolumeSnapshotContent) error {
	if !slices.Contains(c.Finalizers, snapapi.ContentBoundFinalizer) {
		return nil
	}
	logger := klog.FromContext(ctx)
	groupMember := c.Status != nil && c.Status.VolumeGroupSnapshotHandle != nil
	if c.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete && !groupMember {
		handle := snapshotHandle(c)
		if handle == "" && beingCreated(c) {
			found, err := h.createdMeanwhile(ctx, c)
			if err != nil {
				h.cfg.Events.Event(c, corev1.EventTypeWarning, ReasonDeleteError, "Failed to delete snapshot: "+err.Error())
				return err
			}
			handle = found
		}
		if handle != "" {
			if err := h.deleteSnapshot(ctx, c, handle); err != nil {
				h.cfg.Events.Event(c, corev1.EventTypeWarning, ReasonDeleteError, "Failed to delete snapshot: "+err.Error())
				return err
			}
			logger.V(2).Info("Snapshot deleted", "snapshotHandle", handle)
		}
	}
	return h.release(ctx, c)
}

// createdMeanwhile finds out what a CreateSnapshot that may still be running made, by asking again under the
// same name (CreateSnapshot is idempotent by name): the content is going away, and a snapshot made for it
// after it is gone would be a leak nobody sees. It returns "" when the driver refuses with a final error,
// which means there is no such snapshot.
func (h *Handler) createdMeanwhile(ctx context.Context, c *snapv1.VolumeSnapshotContent) (string, error) {
	req, err := h.createRequest(ctx, c)
	if err != nil {
		return "", fmt.Errorf("learning the snapshot of an interrupted CreateSnapshot: %w", err)
	}
	snap, err := h.cfg.CSI.CreateSnapshot(ctx, req)
	if err != nil {
		if csiconn.IsFinal(err) {
			klog.FromContext(ctx).V(2).Info("Interrupted CreateSnapshot made no snapshot", "name", req.Name, "err", err)
			return "", nil
		}
		return "", fmt.Errorf("CreateSnapshot %q of volume %s, to learn the snapshot an interrupted call made: %w", req.Name, req.SourceVolumeId, err)
	}
	return snap.GetSnapshotId(), nil
}

// deleteSnapshot calls DeleteSnapshot with the secret recorded on the content (else the class's, while the
// class exists).
func (h *Handler) deleteSnapshot(ctx context.Context, c *snapv1.VolumeSnapshotContent, handle string) error {
	var classParams map[string]string
	if name := className(c); name != "" {
		if class, err := h.cfg.ClassLister.Get(name); err == nil {
			classParams = class.Parameters
		}
	}
	secrets, err := h.snapshotterCredentials(ctx, c, classParams)
	if err != nil {
		return err
	}
	if err := h.cfg.CSI.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: handle, Secrets: secrets}); err != nil {
		return fmt.Errorf("DeleteSnapshot %s of volumesnapshotcontent %s: %w", handle, c.Name, err)
	}
	return nil
}

// release removes the bound-protection finalizer and a leftover being-created annotation.
func (h *Handler) release(ctx context.Context, c *snapv1.VolumeSnapshotContent) error {
	contents := h.cfg.Client.SnapshotV1().VolumeSnapshotContents()
	get := func(ctx context.Context) (*snapv1.VolumeSnapshotContent, error) {
		return contents.Get(ctx, c.Name, metav1.GetOptions{})
	}
	return release(ctx, h.tracker, c, get, contents.Patch, "volumesnapshotcontent", snapapi.ContentBoundFinalizer, snapapi.AnnBeingCreated)
}

func beingCreated(c *snapv1.VolumeSnapshotContent) bool {
	_, ok := c.Annotations[snapapi.AnnBeingCreated]
	return ok
}
