package handler

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/patch"
)

// attach publishes va's volume to its node in at most two writes: one patch that adds the finalizer
// and records what a later detach needs (node ID, volume handle, secret) before ControllerPublish, and
// one status patch after it. Upstream also puts a finalizer on the PersistentVolume, a third write.
func (h *CSI) attach(ctx context.Context, va *storagev1.VolumeAttachment) error {
	logger := klog.FromContext(ctx).WithValues("volumeattachment", va.Name)
	force := h.forced(va.Name)
	if va.Status.Attached && !force {
		return nil
	}
	vol, err := h.resolveVolume(logger, va)
	if err != nil {
		return h.attachFailed(ctx, va, err)
	}
	// As upstream: a volume on its way out must not reach a new node, where it would hold up the deletion
	// (and the driver's DeleteVolume) until it is detached again. Nothing is written but attachError.
	if vol.deleting != "" {
		return h.attachFailed(ctx, va, fmt.Errorf("persistentvolume %q is being deleted (metadata.deletionTimestamp is set): refusing to attach it", vol.deleting))
	}
	nodeID, err := h.nodeIDForAttach(va)
	if err != nil {
		return h.attachFailed(ctx, va, err)
	}
	handle := vol.spec.CSI.VolumeHandle
	if vol.migrated {
		if handle, err = h.translator.RepairVolumeHandle(handle, nodeID); err != nil {
			return h.attachFailed(ctx, va, err)
		}
	}
	capability, err := h.capability(vol.spec)
	if err != nil {
		return h.attachFailed(ctx, va, err)
	}
	va, err = h.recordIntent(ctx, va, nodeID, handle, vol)
	if err != nil {
		return err
	}
	secrets, err := h.secrets(ctx, vol.secretRef)
	if err != nil {
		return h.attachFailed(ctx, va, err)
	}
	req := &csi.ControllerPublishVolumeRequest{
		VolumeId:         handle,
		NodeId:           nodeID,
		VolumeCapability: capability,
		Readonly:         vol.spec.CSI.ReadOnly && h.cfg.Capabilities.PublishReadOnly,
		Secrets:          secrets,
		VolumeContext:    vol.spec.CSI.VolumeAttributes,
	}
	logger.V(4).Info("ControllerPublishVolume", "volumeID", handle, "nodeID", nodeID, "forced", force)
	publishContext, err := h.cfg.CSI.Publish(csiconn.WithMigrated(ctx, vol.migrated), req)
	if err != nil {
		return h.attachFailed(ctx, va, err)
	}
	// No request when a forced re-publish returned the context the status already holds.
	updated, err := patch.Status(ctx, h.cfg.Client.StorageV1().VolumeAttachments().Patch, va, func(v *storagev1.VolumeAttachment) {
		v.Status.Attached = true
		v.Status.AttachmentMetadata = publishContext
		v.Status.AttachError = nil
	})
	if err != nil {
		return fmt.Errorf("volumeattachment %s: marking attached: %w", va.Name, err)
	}
	h.tracker.Wrote(va, updated)
	h.setForced(va.Name, false)
	logger.V(2).Info("Attached", "volumeID", handle, "nodeID", nodeID)
	return nil
}

// recordIntent adds the finalizer and the detach annotations in one patch preconditioned on va's
// resourceVersion (none when va has them already) and returns the VolumeAttachment as it is now.
func (h *CSI) recordIntent(ctx context.Context, va *storagev1.VolumeAttachment, nodeID, handle string, vol *volume) (*storagev1.VolumeAttachment, error) {
	want := map[string]string{NodeIDAnnotation: nodeID, VolumeHandleAnnotation: handle}
	if vol.secretRef != nil {
		want[PublishSecretAnnotation] = formatSecretRef(vol.secretRef)
	}
	updated, err := patch.Mutate(ctx, h.cfg.Client.StorageV1().VolumeAttachments().Patch, va, func(v *storagev1.VolumeAttachment) {
		if !slices.Contains(v.Finalizers, h.finalizer) {
			v.Finalizers = append(v.Finalizers, h.finalizer)
		}
		if v.Annotations == nil {
			v.Annotations = map[string]string{}
		}
		maps.Copy(v.Annotations, want)
	})
	if err != nil {
		return nil, fmt.Errorf("volumeattachment %s: adding finalizer %s: %w", va.Name, h.finalizer, err)
	}
	h.tracker.Wrote(va, updated)
	return updated, nil
}

func (h *CSI) attachFailed(ctx context.Context, va *storagev1.VolumeAttachment, cause error) error {
	recordError(ctx, &h.cfg, h.tracker, va, "attachError", va.Status.AttachError, cause)
	return fmt.Errorf("attaching volumeattachment %s: %w", va.Name, cause)
}
