package provision

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/patch"
)

// IsOursPV reports whether the PV is one this provisioner made.
func (p *Provisioner) IsOursPV(pv *v1.PersistentVolume) bool {
	if pv.Spec.CSI == nil {
		return p.migratedPV(pv)
	}
	if pv.Spec.CSI.Driver != p.cfg.DriverName {
		return false
	}
	return pv.Annotations[annProvisionedBy] == p.cfg.DriverName || slices.Contains(pv.Finalizers, VolumeFinalizer)
}

// VolumeSettled tells whether SyncVolume would return without a write or a CSI call for pv: it needs no
// finalizer, is not being deleted and is not Released. The controller queues only PVs that are not settled; it
// still queues every deleted PV, so Forget runs.
func (p *Provisioner) VolumeSettled(pv *v1.PersistentVolume) bool {
	return pv.DeletionTimestamp == nil && pv.Status.Phase != v1.VolumeReleased && !p.needsVolumeFinalizer(pv)
}

// SyncVolume adds the deletion-protection finalizer to a bound PV of ours that lacks it (needsVolumeFinalizer),
// and deletes the volume of a Released PV whose reclaim policy is Delete, then the PV. Its writes are two, in
// upstream's order: DeleteVolume first, so that while it fails the PV stays Released and untouched (the usual
// rescue, patching it to Retain, keeps the PV object and its volume), then the PV is deleted, then one patch
// drops the finalizer. DeleteVolume runs once per PV: a PV whose volume is gone is
// remembered, so the events our own writes cause do not call it again
// (kubernetes-csi/external-provisioner#1235), until the lister no longer has the PV (Forget). A restarted
// process, which remembers nothing, calls it again only while our finalizer is on the PV; CSI requires
// DeleteVolume to be idempotent for that case.
func (p *Provisioner) SyncVolume(ctx context.Context, pv *v1.PersistentVolume) (err error) {
	if pv == nil || !p.IsOursPV(pv) {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("pv", pv.Name)
	ctx = klog.NewContext(ctx, logger)
	if here, err := p.volumeOnThisNode(ctx, pv); err != nil || !here {
		return err
	}
	if p.needsVolumeFinalizer(pv) {
		// A bound PV has nothing else to do here: adding the finalizer is the whole sync.
		_, err := p.addVolumeFinalizer(ctx, pv)
		return err
	}

	if pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete {
		if pv.DeletionTimestamp != nil {
			// Retained volumes stay in the storage; only our hold on the PV object goes.
			return p.removePVFinalizer(ctx, pv)
		}
		return nil
	}
	if pv.Status.Phase != v1.VolumeReleased {
		return nil
	}
	if pv.DeletionTimestamp != nil && !slices.Contains(pv.Finalizers, VolumeFinalizer) {
		// Our finalizer goes only after DeleteVolume succeeded (or, on a PV made without it, the PV is deleted
		// only then): this PV waits for other finalizers, its volume is gone. This holds for a process that
		// restarted too, which has no record of the deletion (upstream skips such PVs as well).
		return nil
	}
	switch p.deleteStage(pv) {
	case stageFinalized:
		return nil
	case stageVolumeDeleted, stagePVDeleted:
		return p.finalizePV(ctx, pv)
	}
	if va := p.attachedBy(pv.Name); va != "" {
		return fmt.Errorf("PV %s is still attached (VolumeAttachment %s); not deleting its volume yet", pv.Name, va)
	}

	start := time.Now()
	defer func() { p.Metrics.Deleted(pv.Spec.StorageClassName, start, err) }()

	// An in-tree PV of a migrated plugin (migration.go) is deleted through the driver, by its translated handle.
	handle, err := p.volumeHandle(ctx, pv)
	if err != nil {
		p.event(pv, v1.EventTypeWarning, ReasonVolumeFailedDelete, err.Error())
		return slow(err)
	}
	secrets := p.deletionSecrets(ctx, pv)
	if err := p.deleteVolume(csiconn.WithMigrated(ctx, pv.Spec.CSI == nil), handle, secrets); err != nil {
		p.event(pv, v1.EventTypeWarning, ReasonVolumeFailedDelete, err.Error())
		return err
	}
	p.setDeleteStage(pv, stageVolumeDeleted)
	logger.V(2).Info("Deleted volume", "volumeID", handle)
	// As upstream, only a volume with node affinity names what it freed; one without leaves it to the poll.
	if pv.Spec.NodeAffinity != nil {
		p.refreshCapacity(pv.Spec.StorageClassName, pv.Spec.NodeAffinity)
	}
	return p.finalizePV(ctx, pv)
}

// deleteStage is how far the deletion of a PV got in this process.
type deleteStage int

const (
	stageNone deleteStage = iota
	stageVolumeDeleted
	// stagePVDeleted: the PV object is being deleted too, held by our finalizer only until the next write.
	stagePVDeleted
	stageFinalized
)

func (p *Provisioner) deleteStage(pv *v1.PersistentVolume) deleteStage {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.deleted[pv.Name]; ok && r.uid == pv.UID {
		return r.stage
	}
	return stageNone
}

func (p *Provisioner) setDeleteStage(pv *v1.PersistentVolume, s deleteStage) {
	p.mu.Lock()
	p.deleted[pv.Name] = pvRecord{uid: pv.UID, stage: s}
	p.mu.Unlock()
}

// finalizePV is what follows for a PV whose volume is gone: delete the PV (unless it is being deleted
// already), then drop our finalizer; a PV without it (made before the finalizer existed) is only deleted. The
// stage recorded after each write keeps a stale cached copy from repeating the delete.
func (p *Provisioner) finalizePV(ctx context.Context, pv *v1.PersistentVolume) error {
	if !slices.Contains(pv.Finalizers, VolumeFinalizer) {
		if err := p.deletePV(ctx, pv); err != nil {
			return err
		}
		p.setDeleteStage(pv, stageFinalized)
		return nil
	}
	if pv.DeletionTimestamp == nil && p.deleteStage(pv) < stagePVDeleted {
		if err := p.deletePV(ctx, pv); err != nil {
			return err
		}
		p.setDeleteStage(pv, stagePVDeleted)
	}
	if err := p.removePVFinalizer(ctx, pv); err != nil {
		return err
	}
	p.setDeleteStage(pv, stageFinalized)
	return nil
}

// attachedBy names a VolumeAttachment that references the PV, or "".
func (p *Provisioner) attachedBy(pvName string) string {
	if p.Attachments == nil {
		return ""
	}
	vas, err := p.Attachments.List(everything)
	if err != nil {
		return ""
	}
	for _, va := range vas {
		if n := va.Spec.Source.PersistentVolumeName; n != nil && *n == pvName {
			return va.Name
		}
	}
	return ""
}

// deletionSecrets returns the provisioner secret for DeleteVolume: the one recorded on the PV at provisioning
// time, or, on a PV without that record (provisioned before the annotations existed, or by another
// provisioner), the one its StorageClass names, resolved for this PV and its claim, as upstream does. A secret
// that cannot be found or read does not block the deletion for ever: upstream goes on without it too (the
// secret may have gone with its namespace), and the driver answers if it really needs one. The log says why.
func (p *Provisioner) deletionSecrets(ctx context.Context, pv *v1.PersistentVolume) map[string]string {
	ref, err := p.deletionSecretRef(pv)
	var data map[string]string
	if err == nil {
		data, err = secretData(ctx, p, ref) // nothing to read for a nil ref
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Deleting the volume without the provisioner secret, which cannot be read")
		return nil
	}
	return data
}

// deletionSecretRef is the secret deletionSecrets reads, or nil when there is none to read.
func (p *Provisioner) deletionSecretRef(pv *v1.PersistentVolume) (*secretRef, error) {
	name, ns := pv.Annotations[annDeletionSecretName], pv.Annotations[annDeletionSecretNS]
	if name != "" || ns != "" {
		return &secretRef{name: name, namespace: ns}, nil
	}
	if pv.Spec.StorageClassName == "" {
		return nil, nil
	}
	class, err := p.Classes.Get(pv.Spec.StorageClassName)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	params, err := parseClassParams(class.Parameters)
	if err != nil {
		return nil, err
	}
	// The claim may be gone: its namespace and name are what the PV recorded, as upstream resolves them.
	var claim *v1.PersistentVolumeClaim
	if ref := pv.Spec.ClaimRef; ref != nil {
		claim = &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}}
	}
	return resolveSecret(params.secrets[secretProvisioner], pv.Name, claim)
}

func (p *Provisioner) deletePV(ctx context.Context, pv *v1.PersistentVolume) error {
	uid := pv.UID
	err := p.Kube.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete PV %s: %w", pv.Name, err)
	}
	return nil
}

// removePVFinalizer drops our finalizer with patch.RemoveOwned rather than a resourceVersion precondition: it
// follows our own Delete of the PV, which changed that version, and the cached copy in hand predates it.
func (p *Provisioner) removePVFinalizer(ctx context.Context, pv *v1.PersistentVolume) error {
	_, err := patch.RemoveOwned(ctx, p.Kube.CoreV1().PersistentVolumes().Patch, pv, patch.Owned{Finalizers: []string{VolumeFinalizer}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer from PV %s: %w", pv.Name, err)
	}
	return nil
}
