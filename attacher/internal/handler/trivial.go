package handler

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/ownwrites"
	"github.com/stowage-csi/stowage/shared/patch"
)

// Trivial is the handler for drivers without PUBLISH_UNPUBLISH_VOLUME: there is nothing to call, so a
// VolumeAttachment is marked attached in one status write, with no finalizer, and deletion needs nothing.
type Trivial struct {
	cfg     Config
	tracker *ownwrites.Writes
}

// NewTrivial returns the trivial handler.
func NewTrivial(cfg Config) *Trivial {
	return &Trivial{cfg: cfg, tracker: ownwrites.New()}
}

// SyncVA marks va attached.
func (h *Trivial) SyncVA(ctx context.Context, va *storagev1.VolumeAttachment) (time.Duration, error) {
	if !h.cfg.handles(va) || va.DeletionTimestamp != nil || va.Status.Attached {
		return 0, nil
	}
	if h.tracker.Stale(va) {
		return staleRetry, nil
	}
	updated, err := patch.Status(ctx, h.cfg.Client.StorageV1().VolumeAttachments().Patch, va, func(v *storagev1.VolumeAttachment) {
		v.Status.Attached = true
	})
	if err != nil {
		return 0, fmt.Errorf("volumeattachment %s: marking attached: %w", va.Name, err)
	}
	h.tracker.Wrote(va, updated)
	klog.FromContext(ctx).V(2).Info("Marked attached", "volumeattachment", va.Name)
	return 0, nil
}

// SyncPV has nothing to do: the trivial handler never needs a PersistentVolume finalizer.
func (h *Trivial) SyncPV(context.Context, *v1.PersistentVolume) error { return nil }

// Reconcile has nothing to compare: the driver attaches nothing.
func (h *Trivial) Reconcile(context.Context) ([]string, error) { return nil, nil }

// Forget drops what the handler remembers about a VolumeAttachment that is gone.
func (h *Trivial) Forget(_ string, uid types.UID) { h.tracker.Forget(uid) }
