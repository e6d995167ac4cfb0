package handler

import (
	"context"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/ownwrites"
	"github.com/stowage-csi/stowage/shared/patch"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// observed is what the driver said about a snapshot.
type observed struct {
	handle       string
	ready        bool
	creationTime int64 // Unix nanoseconds
	size         int64
	groupHandle  string
}

// snapshotStatus reads a CSI snapshot; a driver that gives no creation time gets now, as upstream does.
func snapshotStatus(s *csi.Snapshot, now time.Time) observed {
	created := now
	if s.GetCreationTime() != nil {
		created = s.GetCreationTime().AsTime()
	}
	return observed{handle: s.GetSnapshotId(), ready: s.GetReadyToUse(), creationTime: created.UnixNano(),
		size: s.GetSizeBytes(), groupHandle: s.GetGroupSnapshotId()}
}

// writeStatus merges o into the content's status as upstream does (set what is unset, readyToUse always,
// the error cleared once ready) with one status patch preconditioned on the version in hand. After a
// conflict it re-reads the content and tries again, so a snapshot the driver has just made is recorded
// without asking the driver again.
func (h *Handler) writeStatus(ctx context.Context, c *snapv1.VolumeSnapshotContent, o observed) (*snapv1.VolumeSnapshotContent, error) {
	contents := h.cfg.Client.SnapshotV1().VolumeSnapshotContents()
	get := func(ctx context.Context) (*snapv1.VolumeSnapshotContent, error) {
		return contents.Get(ctx, c.Name, metav1.GetOptions{})
	}
	out, err := ownwrites.Retry(ctx, h.tracker, c, get, func(ctx context.Context, cur *snapv1.VolumeSnapshotContent) (*snapv1.VolumeSnapshotContent, error) {
		return patch.Status(ctx, contents.Patch, cur, func(v *snapv1.VolumeSnapshotContent) { mergeStatus(v, o) })
	})
	if err != nil {
		return c, fmt.Errorf("volumesnapshotcontent %s: writing status (snapshotHandle %s): %w", c.Name, o.handle, err)
	}
	return out, nil
}

func mergeStatus(v *snapv1.VolumeSnapshotContent, o observed) {
	if v.Status == nil {
		v.Status = &snapv1.VolumeSnapshotContentStatus{}
	}
	s := v.Status
	if s.SnapshotHandle == nil {
		s.SnapshotHandle = &o.handle
	}
	s.ReadyToUse = &o.ready
	if o.ready {
		s.Error = nil
	}
	if s.CreationTime == nil {
		s.CreationTime = &o.creationTime
	}
	if s.RestoreSize == nil && o.size > 0 {
		s.RestoreSize = &o.size
	}
	if s.VolumeGroupSnapshotHandle == nil && o.groupHandle != "" {
		s.VolumeGroupSnapshotHandle = &o.groupHandle
	}
}

// failed records cause in status.error (readyToUse false) with a Warning Event of reason, unless the status
// already holds the same message: a retry failing the same way writes nothing. It returns cause, which drives
// the backoff; a failed status write is only logged.
func (h *Handler) failed(ctx context.Context, c *snapv1.VolumeSnapshotContent, reason, what string, cause error) error {
	fields := func(v *snapv1.VolumeSnapshotContent, create bool) (**snapv1.VolumeSnapshotError, **bool) {
		if v.Status == nil && create {
			v.Status = &snapv1.VolumeSnapshotContentStatus{}
		} else if v.Status == nil {
			return nil, nil
		}
		return &v.Status.Error, &v.Status.ReadyToUse
	}
	return failStatus(ctx, h.tracker, h.cfg.Events, h.cfg.Client.SnapshotV1().VolumeSnapshotContents().Patch, c, fields, h.cfg.now(), reason, what, cause)
}

// failStatus is failed for a content or a group content: fields points at the status's error and readyToUse,
// creating the status when asked (nil pointers for none).
func failStatus[T patch.Object](ctx context.Context, tracker *ownwrites.Writes, events record.EventRecorder, patchFn patch.Func[T], obj T,
	fields func(obj T, create bool) (**snapv1.VolumeSnapshotError, **bool), now time.Time, reason, what string, cause error) error {
	logger := klog.FromContext(ctx)
	msg := what + ": " + cause.Error()
	logger.Error(cause, what, "reason", reason)
	if last, _ := fields(obj, false); last != nil && *last != nil && (*last).Message != nil && *(*last).Message == msg {
		return cause
	}
	ts := metav1.NewTime(now)
	updated, err := patch.Status(ctx, patchFn, obj, func(v T) {
		errp, ready := fields(v, true)
		*errp = &snapv1.VolumeSnapshotError{Time: &ts, Message: &msg}
		*ready = new(false)
	})
	if err != nil {
		logger.Error(err, "Writing status.error")
	} else {
		tracker.Wrote(obj, updated)
	}
	events.Event(obj, corev1.EventTypeWarning, reason, msg)
	return cause
}

// markBeingCreated sets the being-created annotation (one preconditioned patch; none when it is there) and
// returns the content as it is now.
func (h *Handler) markBeingCreated(ctx context.Context, c *snapv1.VolumeSnapshotContent) (*snapv1.VolumeSnapshotContent, error) {
	contents := h.cfg.Client.SnapshotV1().VolumeSnapshotContents()
	get := func(ctx context.Context) (*snapv1.VolumeSnapshotContent, error) {
		return contents.Get(ctx, c.Name, metav1.GetOptions{})
	}
	return setAnnotation(ctx, h.tracker, c, get, contents.Patch, "volumesnapshotcontent", snapapi.AnnBeingCreated)
}

// removeBeingCreated drops the being-created annotation. Only csi-snapshotter sets it, so it goes with a JSON
// patch that tests its value instead of the resourceVersion: the snapshot controller's finalizer patch of the
// same moment does not turn it into a conflict.
func (h *Handler) removeBeingCreated(ctx context.Context, c *snapv1.VolumeSnapshotContent) (*snapv1.VolumeSnapshotContent, error) {
	return removeOwnedAnnotation(ctx, h.tracker, c, h.cfg.Client.SnapshotV1().VolumeSnapshotContents().Patch, "volumesnapshotcontent", snapapi.AnnBeingCreated)
}

// setAnnotation sets annotation to "yes" on a content or group content with one patch preconditioned on the
// version in hand (none when it is there), re-reading with get after a conflict, and returns obj as it is now.
func setAnnotation[T patch.Object](ctx context.Context, tracker *ownwrites.Writes, obj T, get func(context.Context) (T, error),
	patchFn patch.Func[T], kind, annotation string) (T, error) {
	out, err := ownwrites.Retry(ctx, tracker, obj, get, func(ctx context.Context, cur T) (T, error) {
		return patch.SetAnnotation(ctx, patchFn, cur, annotation, "yes")
	})
	if err != nil {
		return obj, fmt.Errorf("%s %s: setting annotation %s: %w", kind, obj.GetName(), annotation, err)
	}
	return out, nil
}

// removeOwnedAnnotation drops an annotation only csi-snapshotter sets with a JSON patch that tests its value.
func removeOwnedAnnotation[T patch.Object](ctx context.Context, tracker *ownwrites.Writes, obj T, patchFn patch.Func[T], kind, annotation string) (T, error) {
	updated, err := patch.RemoveOwned(ctx, patchFn, obj, patch.Owned{Annotations: []string{annotation}})
	if err != nil {
		return obj, fmt.Errorf("%s %s: removing annotation %s: %w", kind, obj.GetName(), annotation, err)
	}
	tracker.Wrote(obj, updated)
	return updated, nil
}
