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
	before := vs
	updated, err := patch.RetryOnConflict(ctx, vs, c.getSnapshot(vs), func(ctx context.Context, vs *snapv1.VolumeSnapshot) (*snapv1.VolumeSnapshot, error) {
		before = vs
		return patch.Status(ctx, c.snapshotPatch(vs.Namespace), vs, func(vs *snapv1.VolumeSnapshot) {
			vs.Status = mergeStatus(vs.Status, content)
		})
	})
	if err != nil {
		return vs, fmt.Errorf("volumesnapshot %s/%s status: %w", vs.Namespace, vs.Name, err)
	}
	key := vs.Namespace + "/" + vs.Name
	if !isCreated(before) && isCreated(updated) {
		c.cfg.Metrics.Record(opmetrics.CreateSnapshot, vs.UID, opmetrics.StatusSuccess, content.Spec.Driver)
		c.cfg.Events.Event(updated, v1.EventTypeNormal, "SnapshotCreated", fmt.Sprintf("Snapshot %s was successfully created by the CSI driver.", key))
	}
	if !isReady(before) && isReady(updated) {
		c.cfg.Metrics.Record(opmetrics.CreateSnapshotAndReady, vs.UID, opmetrics.StatusSuccess, content.Spec.Driver)
		c.cfg.Events.Event(updated, v1.EventTypeNormal, "SnapshotReady", fmt.Sprintf("Snapshot %s is ready to use.", key))
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
