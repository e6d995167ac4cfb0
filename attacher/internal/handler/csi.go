package handler

import (
	"context"
	"sync"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stowage-csi/stowage/attacher/internal/translate"
	"github.com/stowage-csi/stowage/shared/ownwrites"
)

// CSI is the handler for drivers with PUBLISH_UNPUBLISH_VOLUME.
type CSI struct {
	cfg        Config
	finalizer  string
	translator *translate.Translator
	tracker    *ownwrites.Writes

	mu sync.Mutex
	// forceSync holds VolumeAttachments that Kubernetes shows attached but the driver reports detached
	// (found by Reconcile); their next sync publishes again even though status.attached is true.
	forceSync map[string]struct{}
}

// NewCSI returns the CSI handler.
func NewCSI(cfg Config) *CSI {
	return &CSI{
		cfg:        cfg,
		finalizer:  FinalizerName(cfg.Driver),
		translator: translate.New(cfg.Driver),
		tracker:    ownwrites.New(),
		forceSync:  map[string]struct{}{},
	}
}

// SyncVA attaches or detaches va. A positive duration asks the caller to look again after it without
// counting a failure (the cache has not caught up with our own write yet).
func (h *CSI) SyncVA(ctx context.Context, va *storagev1.VolumeAttachment) (time.Duration, error) {
	if !h.cfg.handles(va) {
		return 0, nil
	}
	if h.tracker.Stale(va) {
		return staleRetry, nil
	}
	if va.DeletionTimestamp != nil {
		return 0, h.detach(ctx, va)
	}
	return 0, h.attach(ctx, va)
}

// Forget drops what the handler remembers about a VolumeAttachment that is gone.
func (h *CSI) Forget(name string, uid types.UID) {
	h.tracker.Forget(uid)
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.forceSync, name)
}

func (h *CSI) forced(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.forceSync[name]
	return ok
}

func (h *CSI) setForced(name string, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if on {
		h.forceSync[name] = struct{}{}
	} else {
		delete(h.forceSync, name)
	}
}
