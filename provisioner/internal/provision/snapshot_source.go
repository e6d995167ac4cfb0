package provision

import (
	"context"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// planSnapshot checks the VolumeSnapshot (ready, not being deleted, bound to a content of this driver, not larger
// than the new volume, same volume mode unless the content allows a change) and sets it as the content source.
// Snapshots are read with direct GETs: restores are rare and a cluster-wide snapshot cache is not worth its memory.
func (p *Provisioner) planSnapshot(ctx context.Context, claim *v1.PersistentVolumeClaim, plan *createPlan, size int64) error {
	if !p.cfg.Capabilities.Snapshot {
		// Upstream refuses too: a driver without snapshots cannot know the handle, and CreateVolume would fail
		// or, worse, ignore the content source and hand back an empty volume.
		return slow(fmt.Errorf("dataSource: driver %s does not support restoring from a VolumeSnapshot (no CREATE_DELETE_SNAPSHOT capability)", p.cfg.DriverName))
	}
	if p.Snapshots == nil {
		return slow(fmt.Errorf("dataSource: restoring from a VolumeSnapshot needs the snapshot.storage.k8s.io API, which this provisioner has no client for"))
	}
	vs, err := p.Snapshots.SnapshotV1().VolumeSnapshots(claim.Namespace).Get(ctx, plan.sourceName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("dataSource: get VolumeSnapshot %s/%s: %w", claim.Namespace, plan.sourceName, err)
	}
	if vs.DeletionTimestamp != nil && !slices.Contains(vs.Finalizers, SnapshotSourceFinalizer) {
		// Starting a restore from a snapshot that is going away is how upstream leaked
		// (kubernetes-csi/external-provisioner#1449). With our finalizer on it, a restore (ours or an upstream
		// provisioner's, swapped out mid-way) is under way and the finalizer holds the snapshot for it: finishing
		// it, as upstream does, is what lets the finalizer, and then the snapshot, go.
		return fmt.Errorf("dataSource: VolumeSnapshot %s/%s is being deleted", vs.Namespace, vs.Name)
	}
	if vs.Status == nil || vs.Status.ReadyToUse == nil || !*vs.Status.ReadyToUse || vs.Status.BoundVolumeSnapshotContentName == nil {
		return fmt.Errorf("dataSource: VolumeSnapshot %s/%s is not ready to use", vs.Namespace, vs.Name)
	}
	vsc, err := p.Snapshots.SnapshotV1().VolumeSnapshotContents().Get(ctx, *vs.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("dataSource: get VolumeSnapshotContent %s: %w", *vs.Status.BoundVolumeSnapshotContentName, err)
	}
	if ref := vsc.Spec.VolumeSnapshotRef; ref.Name != vs.Name || ref.Namespace != vs.Namespace || (ref.UID != "" && ref.UID != vs.UID) {
		return fmt.Errorf("dataSource: VolumeSnapshotContent %s is bound to %s/%s, not to VolumeSnapshot %s/%s", vsc.Name, ref.Namespace, ref.Name, vs.Namespace, vs.Name)
	}
	if vsc.Spec.Driver != p.cfg.DriverName {
		return slow(fmt.Errorf("dataSource: VolumeSnapshot %s/%s was taken by driver %s, not %s", vs.Namespace, vs.Name, vsc.Spec.Driver, p.cfg.DriverName))
	}
	if vsc.Status == nil || vsc.Status.SnapshotHandle == nil || *vsc.Status.SnapshotHandle == "" {
		return fmt.Errorf("dataSource: VolumeSnapshotContent %s has no snapshot handle yet", vsc.Name)
	}
	if rs := vs.Status.RestoreSize; rs != nil && size < rs.Value() {
		return slow(fmt.Errorf("dataSource: requested size %d is smaller than VolumeSnapshot %s/%s restore size %d", size, vs.Namespace, vs.Name, rs.Value()))
	}
	if p.cfg.PreventVolumeModeConversion && vsc.Spec.SourceVolumeMode != nil &&
		*vsc.Spec.SourceVolumeMode != modeOf(claim.Spec.VolumeMode) && vsc.Annotations[annAllowVolumeModeChange] != "true" {
		return slow(fmt.Errorf("dataSource: VolumeSnapshot %s/%s has volume mode %s, the claim asks for %s, and VolumeSnapshotContent %s lacks annotation %s=true",
			vs.Namespace, vs.Name, *vsc.Spec.SourceVolumeMode, modeOf(claim.Spec.VolumeMode), vsc.Name, annAllowVolumeModeChange))
	}
	plan.req.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: *vsc.Status.SnapshotHandle},
	}}
	return nil
}

// protectSnapshot adds the as-source protection finalizer to the VolumeSnapshot.
func (p *Provisioner) protectSnapshot(ctx context.Context, namespace, name string) error {
	vs, err := p.Snapshots.SnapshotV1().VolumeSnapshots(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("dataSource: get VolumeSnapshot %s/%s: %w", namespace, name, err)
	}
	if _, err := updateObject(ctx, p.Snapshots.SnapshotV1().VolumeSnapshots(namespace).Update, vs, func(s *snapv1.VolumeSnapshot) {
		if !slices.Contains(s.Finalizers, SnapshotSourceFinalizer) {
			s.Finalizers = append(s.Finalizers, SnapshotSourceFinalizer)
		}
	}); err != nil {
		return fmt.Errorf("update VolumeSnapshot %s/%s: %w", namespace, name, err)
	}
	return nil
}

// releaseLeftSnapshot releases the as-source protection of a bound claim restored from a snapshot, once per claim
// in this process: a provisioner swapped out (upstream's, or a Stowage that crashed) may have created the PV and
// stopped before removing its finalizer from the snapshot, which upstream's periodic sweep would later remove and
// nothing else would. Claims this process provisioned released it already (claimReleased) and cost nothing here;
// others cost one GET of the snapshot per process start.
func (p *Provisioner) releaseLeftSnapshot(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	src := sourceOf(claim)
	if src.kind != sourceSnapshot || src.otherNS != "" || p.Snapshots == nil || p.claimStage(claim) == claimReleased {
		return nil
	}
	if err := p.releaseSnapshot(ctx, claim.Namespace, src.name, claim.UID); err != nil {
		return err
	}
	p.setClaimStage(claim, claimReleased)
	return nil
}

// releaseSnapshot removes the as-source protection of namespace/name once no claim other than the one with UID
// except is being restored from the snapshot. Doing it when the claim finishes, instead of in a periodic sweep,
// is what keeps the finalizer from being orphaned (kubernetes-csi/external-provisioner#1507).
func (p *Provisioner) releaseSnapshot(ctx context.Context, namespace, name string, except types.UID) error {
	if p.Snapshots == nil {
		return nil
	}
	n, err := p.pendingUsers(namespace, sourceSnapshot, name, except)
	if err != nil || n > 0 {
		return err
	}
	vs, err := p.Snapshots.SnapshotV1().VolumeSnapshots(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get VolumeSnapshot %s/%s: %w", namespace, name, err)
	}
	_, err = updateObject(ctx, p.Snapshots.SnapshotV1().VolumeSnapshots(namespace).Update, vs, func(s *snapv1.VolumeSnapshot) {
		s.Finalizers = slices.DeleteFunc(s.Finalizers, func(f string) bool { return f == SnapshotSourceFinalizer })
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update VolumeSnapshot %s/%s: %w", namespace, name, err)
	}
	return nil
}
