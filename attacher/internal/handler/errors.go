package handler

import (
	"context"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/attacher/internal/csiattach"
	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/ownwrites"
	"github.com/stowage-csi/stowage/shared/patch"
)

// recordError writes cause to status.<field> (attachError or detachError) with its gRPC code. A retry
// that fails the same way as the last one writes nothing: the status already says so, and upstream's
// write per failed try is pure API load. A failure to write is logged; the caller's error still drives
// the backoff.
func recordError(ctx context.Context, cfg *Config, tracker *ownwrites.Writes, va *storagev1.VolumeAttachment, field string, current *storagev1.VolumeError, cause error) {
	logger := klog.FromContext(ctx).WithValues("volumeattachment", va.Name)
	logger.Error(cause, "Operation failed", "field", field, "final", csiconn.IsFinal(cause))
	volErr := &storagev1.VolumeError{Time: metav1.NewTime(cfg.now()), Message: cause.Error()}
	if code, ok := csiattach.Code(cause); ok && !cfg.OmitErrorCode {
		c := int32(code)
		volErr.ErrorCode = &c
	}
	if current != nil && current.Message == volErr.Message && equalCode(current.ErrorCode, volErr.ErrorCode) {
		return
	}
	updated, err := patch.Status(ctx, cfg.Client.StorageV1().VolumeAttachments().Patch, va, func(v *storagev1.VolumeAttachment) {
		if field == "attachError" {
			v.Status.AttachError = volErr
		} else {
			v.Status.DetachError = volErr
		}
	})
	if err != nil {
		logger.Error(err, "Writing status", "field", field)
		return
	}
	tracker.Wrote(va, updated)
}

func equalCode(a, b *int32) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
