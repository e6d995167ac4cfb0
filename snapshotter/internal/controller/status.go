package controller

import (
	"context"
	"fmt"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/shared/patch"
	"github.com/stowage-csi/stowage/snapshotter/internal/controller/opmetrics"
)

// updateStatus copies the content's status onto the snapshot with one status patch, by upstream's rules: the
// bound name and creation time are set once, readyToUse follows the content, restoreSize is set once (or when it
// was 0), the error follows the content's. It records SnapshotCreated and SnapshotReady on the transitions.
func (c *Controller) updateStatus(ctx context.Context, vs *snapv1.VolumeSnapshot, content *snapv1.VolumeSnapshotContent) (*snapv1.VolumeSnapshot, error) {
	return writeStatus(ctx, c, vs, c.getSnapshot(vs), c.snapshotPatch(vs.Namespace),
		func(vs *snapv1.VolumeSnapshot) { vs.Status = mergeStatus(vs.Status, content) }, "volumesnapshot", content.Spec.Driver,
		statusStep[*snapv1.VolumeSnapshot]{isCreated, opmetrics.CreateSnapshot, "SnapshotCreated", "Snapshot %s was successfully created by the CSI driver."},
		statusStep[*snapv1.VolumeSnapshot]{isReady, opmetrics.CreateSnapshotAndReady, "SnapshotReady", "Snapshot %s is ready to use."})
}

// statusStep is a step of creation a status write can reach: counted in the operation metrics and announced
// with an Event, once, by the write that reaches it.
type statusStep[T any] struct {
	reached func(T) bool
	op      string
	// reason and message are the Event's; message has a %s for the snapshot's namespace/name.
	reason, message string
}

// writeStatus is the status write of a snapshot or a group snapshot: merge applied in one status patch,
// re-reading with get after a conflict, then each step that write reached counted and announced. kind names
// the object in errors; driver labels the metrics.
func writeStatus[T patch.Object](ctx context.Context, c *Controller, obj T, get func(context.Context) (T, error),
	patchFn patch.Func[T], merge func(T), kind, driver string, steps ...statusStep[T]) (T, error) {
	before := obj
	updated, err := patch.RetryOnConflict(ctx, obj, get, func(ctx context.Context, cur T) (T, error) {
		before = cur
		return patch.Status(ctx, patchFn, cur, merge)
	})
	if err != nil {
		return obj, fmt.Errorf("%s %s/%s status: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	key := obj.GetNamespace() + "/" + obj.GetName()
	for _, s := range steps {
		if !s.reached(before) && s.reached(updated) {
			c.cfg.Metrics.Record(s.op, obj.GetUID(), opmetrics.StatusSuccess, driver)
			c.cfg.Events.Event(updated, v1.EventTypeNormal, s.reason, fmt.Sprintf(s.message, key))
		}
	}
	return updated, nil
}

// mergeStatus returns the snapshot status old updated from content's status (upstream's updateSnapshotStatus).
func mergeStatus(old *snapv1.VolumeSnapshotStatus, content *snapv1.VolumeSnapshotContent) *snapv1.VolumeSnapshotStatus {
	cs := content.Status
	if cs == nil {
		cs = &snapv1.VolumeSnapshotContentStatus{}
	}
	ready := cs.ReadyToUse != nil && *cs.ReadyToUse
	var created *metav1.Time
	if cs.CreationTime != nil {
		created = &metav1.Time{Time: time.Unix(0, *cs.CreationTime)}
	}
	var contentErr *snapv1.VolumeSnapshotError
	if cs.Error != nil {
		contentErr = cs.Error.DeepCopy()
	}

	st := &snapv1.VolumeSnapshotStatus{}
	if old != nil {
		st = old.DeepCopy()
	}
	if st.BoundVolumeSnapshotContentName == nil {
		st.BoundVolumeSnapshotContentName = &content.Name
	}
	if st.CreationTime == nil && created != nil {
		st.CreationTime = created
	}
	if st.ReadyToUse == nil || *st.ReadyToUse != ready {
		st.ReadyToUse = &ready
	}
	if cs.RestoreSize != nil && (st.RestoreSize == nil || (st.RestoreSize.IsZero() && *cs.RestoreSize > 0)) {
		st.RestoreSize = resource.NewQuantity(*cs.RestoreSize, resource.BinarySI)
	}
	// The snapshot's error follows the content's: set, replaced, or cleared when the content has none.
	st.Error = contentErr
	return st
}
