package handler

import (
	"context"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/attacher/internal/csiattach"
	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/patch"
)

// detach unpublishes a deleted VolumeAttachment and then releases its finalizer in one patch, after which
// the API server removes the object; status.attached=false would be written to an object about to vanish,
// so it is not written (upstream writes it, and that second write re-queues the object for a second
// ControllerUnpublish, kubernetes-csi/external-attacher#587).
func (h *CSI) detach(ctx context.Context, va *storagev1.VolumeAttachment) error {
	if !slices.Contains(va.Finalizers, h.finalizer) {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("volumeattachment", va.Name)
	handle := va.Annotations[VolumeHandleAnnotation]
	secretRef, err := parseSecretRef(va.Annotations[PublishSecretAnnotation])
	if err != nil {
		return h.detachFailed(ctx, va, err)
	}
	nodeID, err := h.nodeIDForDetach(va)
	if err != nil {
		return h.detachFailed(ctx, va, err)
	}
	migrated := false
	if handle == "" {
		// Attached by upstream's attacher, which keeps this on the PersistentVolume (protected by its
		// PV finalizer) rather than on the VolumeAttachment.
		vol, err := h.resolveVolume(logger, va)
		if err != nil {
			return h.detachFailed(ctx, va, err)
		}
		handle, secretRef, migrated = vol.spec.CSI.VolumeHandle, vol.secretRef, vol.migrated
		if migrated {
			if handle, err = h.translator.RepairVolumeHandle(handle, nodeID); err != nil {
				return h.detachFailed(ctx, va, err)
			}
		}
	}
	secrets, err := h.secrets(ctx, secretRef)
	if err != nil {
		return h.detachFailed(ctx, va, err)
	}
	logger.V(4).Info("ControllerUnpublishVolume", "volumeID", handle, "nodeID", nodeID)
	err = h.cfg.CSI.Unpublish(csiconn.WithMigrated(ctx, migrated), &csi.ControllerUnpublishVolumeRequest{
		VolumeId: handle,
		NodeId:   nodeID,
		Secrets:  secrets,
	})
	if code, ok := csiattach.Code(err); err != nil && ok && code == codes.NotFound {
		// The volume or the node no longer exists, so the volume is attached to nothing; retrying would
		// keep the VolumeAttachment, and the Pod waiting for its deletion, stuck forever.
		logger.Info("Driver reports the volume or node gone; treating it as detached", "volumeID", handle, "nodeID", nodeID, "err", err)
		err = nil
	}
	if err != nil {
		return h.detachFailed(ctx, va, err)
	}
	if err := h.releaseFinalizer(ctx, va); err != nil {
		return err
	}
	logger.V(2).Info("Detached", "volumeID", handle, "nodeID", nodeID)
	return nil
}

// releaseFinalizer removes our finalizer with one patch. If someone changed the object meanwhile (409), it
// reads it again and retries the patch only: ControllerUnpublish already succeeded and is not repeated.
func (h *CSI) releaseFinalizer(ctx context.Context, va *storagev1.VolumeAttachment) error {
	client := h.cfg.Client.StorageV1().VolumeAttachments()
	get := func(ctx context.Context) (*storagev1.VolumeAttachment, error) {
		return client.Get(ctx, va.Name, metav1.GetOptions{})
	}
	_, err := patch.RetryOnConflict(ctx, va, get, func(ctx context.Context, cur *storagev1.VolumeAttachment) (*storagev1.VolumeAttachment, error) {
		if cur.UID != va.UID {
			return cur, nil // deleted and created again: not ours to release
		}
		return patch.RemoveFinalizer(ctx, client.Patch, cur, h.finalizer)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("volumeattachment %s: removing finalizer %s: %w", va.Name, h.finalizer, err)
	}
	// Whatever version the cache holds now, it is one the removal replaced (or the object is gone).
	h.tracker.Superseded(va.UID, va.ResourceVersion)
	return nil
}

func (h *CSI) detachFailed(ctx context.Context, va *storagev1.VolumeAttachment, cause error) error {
	recordError(ctx, &h.cfg, h.tracker, va, "detachError", va.Status.DetachError, cause)
	return fmt.Errorf("detaching volumeattachment %s: %w", va.Name, cause)
}

// SyncPV removes upstream's PersistentVolume finalizer from a PV being deleted once no VolumeAttachment
// may still need the PV: Stowage itself never adds it (what detach needs lives on the VolumeAttachment),
// but an upstream attacher that ran before may have.
func (h *CSI) SyncPV(ctx context.Context, pv *v1.PersistentVolume) error {
	if pv.DeletionTimestamp == nil || !slices.Contains(pv.Finalizers, h.finalizer) {
		return nil
	}
	vas, err := h.cfg.VALister.List(labelsEverything())
	if err != nil {
		return fmt.Errorf("listing volumeattachments: %w", err)
	}
	for _, va := range vas {
		src := va.Spec.Source.PersistentVolumeName
		if src != nil && *src == pv.Name && va.Annotations[VolumeHandleAnnotation] == "" {
			klog.FromContext(ctx).V(4).Info("PersistentVolume still needed", "persistentvolume", pv.Name, "volumeattachment", va.Name)
			return nil
		}
	}
	client := h.cfg.Client.CoreV1().PersistentVolumes()
	get := func(ctx context.Context) (*v1.PersistentVolume, error) {
		return client.Get(ctx, pv.Name, metav1.GetOptions{})
	}
	_, err = patch.RetryOnConflict(ctx, pv, get, func(ctx context.Context, cur *v1.PersistentVolume) (*v1.PersistentVolume, error) {
		return patch.RemoveFinalizer(ctx, client.Patch, cur, h.finalizer)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("persistentvolume %s: removing finalizer %s: %w", pv.Name, h.finalizer, err)
	}
	return nil
}
