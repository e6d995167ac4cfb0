package provision

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/csiconn"
)

// IsOurs reports whether the claim is one this provisioner must look at: annotated for the driver, or with a
// journal entry of ours (or the legacy intent finalizer an older Stowage wrote), which must be
// finished even if the annotation went away.
func (p *Provisioner) IsOurs(claim *v1.PersistentVolumeClaim) bool {
	if hasLegacyIntent(claim) || p.journaled(claim.UID) {
		return true
	}
	a := claim.Annotations[annStorageProvisioner]
	if a == "" {
		a = claim.Annotations[annBetaStorageProvisioner]
	}
	return a == p.cfg.DriverName || p.migratedClaim(claim, a)
}

// ClaimSettled tells whether SyncClaim would return without a write or a CSI call for this copy of a claim of
// ours: it is bound and not being deleted, carries no legacy intent, has no entry in the journal (under its UID or
// an earlier claim's of its name), and is not restored from a snapshot (whose as-source finalizer a bound claim
// may still have to release). The controller leaves such claims out of the claim queue, so the initial LIST of a
// cluster's bound claims costs no queue entry, deep copy or sync each.
func (p *Provisioner) ClaimSettled(claim *v1.PersistentVolumeClaim) bool {
	if claim.DeletionTimestamp != nil || claim.Spec.VolumeName == "" || hasLegacyIntent(claim) || p.journaled(claim.UID) {
		return false
	}
	if p.Journal != nil && len(p.Journal.ForClaim(claim.Namespace, claim.Name)) > 0 {
		return false
	}
	return sourceOf(claim).kind != sourceSnapshot
}

// SyncClaim brings one claim to its goal: a PV for a claim that needs one, or, for a claim deleted mid-way, no
// volume left behind. It is level-triggered: the claim's entry in the journal (or the legacy intent finalizer an
// older Stowage wrote) says where a previous run (this process or one that crashed) stopped.
func (p *Provisioner) SyncClaim(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	if claim == nil {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("pvc", klog.KObj(claim))
	ctx = klog.NewContext(ctx, logger)
	// Entries of earlier claims of this name (deleted, then re-created) are undone first: they are keyed by UID.
	if err := p.undoEntries(ctx, claim.Namespace, claim.Name, claim.UID); err != nil {
		return err
	}
	if !p.IsOurs(claim) || p.claimOfOtherNode(claim) {
		return nil
	}
	volName := p.volumeName(claim.UID)
	entry, journaled := p.entry(claim.UID)
	if journaled {
		volName = entry.Volume
	} else if v := claim.Annotations[IntentKey]; v != "" && hasLegacyIntent(claim) {
		// The name a possibly earlier run (maybe with another --volume-name-prefix) sent to CreateVolume.
		volName = v
	}
	if settled, err := p.settle(ctx, claim, entry, journaled, volName); settled {
		return err
	}
	class, err := p.classToProvision(ctx, claim)
	if class == nil {
		return err
	}
	selectedNode, ours, err := p.placement(ctx, claim, class)
	if !ours {
		return err
	}
	return p.provision(ctx, claim, class, volName, selectedNode)
}

// settle handles a claim that needs no new volume: deleted mid-way (its volume undone or abandoned), released,
// bound, or with its PV already made. It reports whether it handled the claim, with the result.
func (p *Provisioner) settle(ctx context.Context, claim *v1.PersistentVolumeClaim, entry journalEntry, journaled bool, volName string) (bool, error) {
	stage := p.claimStage(claim)
	if claim.DeletionTimestamp != nil {
		if journaled {
			return true, p.undo(ctx, entry)
		}
		if !hasLegacyIntent(claim) || stage == claimReleased {
			return true, nil
		}
		return true, p.abandon(ctx, claim, volName)
	}
	if stage == claimReleased {
		// Done here; this copy predates our last write.
		return true, nil
	}
	if claim.Spec.VolumeName != "" {
		// Bound (or pre-bound by the user): nothing to provision. A volume made for the claim but not the one it is
		// bound to is undone; else drop a journal entry or legacy intent left from before the binding, or a snapshot's as-source
		// finalizer another provisioner left.
		if journaled && claim.Spec.VolumeName != entry.Volume {
			return true, p.undo(ctx, entry)
		}
		if journaled || hasLegacyIntent(claim) {
			return true, p.finishProvisioning(ctx, claim)
		}
		return true, p.releaseLeftSnapshot(ctx, claim)
	}
	if _, err := p.Volumes.Get(volName); err == nil || stage == claimPVCreated {
		// The PV is there; the binder will bind it. Only the journal entry or legacy intent may be left to release.
		return true, p.finishProvisioning(ctx, claim)
	}
	return false, nil
}

// betaClassAnnotation names a claim's class on claims written before spec.storageClassName existed; the binder
// and upstream's provisioner still read it first.
const betaClassAnnotation = "volume.beta.kubernetes.io/storage-class"

// ClaimClass is the claim's StorageClass name as the binder reads it: the beta annotation when present, else
// spec.storageClassName.
func ClaimClass(claim *v1.PersistentVolumeClaim) string {
	if class, ok := claim.Annotations[betaClassAnnotation]; ok {
		return class
	}
	if claim.Spec.StorageClassName != nil {
		return *claim.Spec.StorageClassName
	}
	return ""
}

// classToProvision returns the claim's StorageClass when this provisioner is to make its volume now; nil, with
// an error or not, when not (another provisioner's class, an external populator, an unsupported source).
func (p *Provisioner) classToProvision(ctx context.Context, claim *v1.PersistentVolumeClaim) (*storagev1.StorageClass, error) {
	className := ClaimClass(claim)
	class, err := p.Classes.Get(className)
	if err != nil {
		p.event(claim, v1.EventTypeWarning, ReasonProvisioningFailed, fmt.Sprintf("storageclass.storage.k8s.io %q: %v", className, err))
		return nil, fmt.Errorf("get StorageClass %q: %w", className, err)
	}
	class, err = p.csiClass(ctx, class)
	if err != nil {
		p.event(claim, v1.EventTypeWarning, ReasonProvisioningFailed, err.Error())
		return nil, err
	}
	if class == nil {
		return nil, nil // another provisioner's class
	}
	src := sourceOf(claim)
	if src.populator != "" {
		p.event(claim, v1.EventTypeNormal, ReasonExternalProvisioning,
			fmt.Sprintf("Assuming an external populator will provision the volume from %s", src.populator))
		return nil, nil
	}
	if src.otherNS != "" {
		p.event(claim, v1.EventTypeWarning, ReasonProvisioningFailed, "dataSourceRef: a data source in another namespace is not supported")
		return nil, slow(fmt.Errorf("cross-namespace data source %s/%s", src.otherNS, src.name))
	}
	return class, nil
}

// placement returns the node the volume is made for (empty for none) and whether this provisioner makes it
// now: not before the scheduler picked a node, not for another node's claim under --node-deployment; a claim
// whose node is gone goes back to the scheduler.
func (p *Provisioner) placement(ctx context.Context, claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass) (string, bool, error) {
	selectedNode := claim.Annotations[annSelectedNode]
	late := class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
	if late && selectedNode == "" {
		// The scheduler picks the node first.
		return "", false, nil
	}
	if p.cfg.NodeName != "" && selectedNode == "" && p.cfg.NodeDeploymentImmediateBinding {
		// --node-deployment with immediate binding: every node's provisioner that could make the volume
		// (nodelocal.go) races to take the claim; the resourceVersion guard lets exactly one write win, the
		// others see the winner's node and step aside.
		if take, err := p.mayTakeImmediate(ctx, claim, class); !take {
			return "", false, err
		}
		_, err := p.mutateClaim(ctx, claim, func(c *v1.PersistentVolumeClaim) {
			metav1.SetMetaDataAnnotation(&c.ObjectMeta, annSelectedNode, p.cfg.NodeName)
		})
		return "", false, err
	}
	if p.cfg.NodeName != "" && selectedNode != p.cfg.NodeName {
		return "", false, nil
	}
	// Under --node-deployment the selected node is this one, which exists while it runs: a missed cache entry
	// must not hand the claim (and its journal entry, which only this node would finish) back to the scheduler.
	if selectedNode != "" && p.cfg.NodeName == "" {
		gone, err := p.nodeGone(ctx, selectedNode)
		if err != nil {
			return "", false, err
		}
		if gone {
			return "", false, p.rescheduleFromGoneNode(ctx, claim, selectedNode)
		}
	}
	return selectedNode, true, nil
}

// provision runs the create path: plan, record the journal entry, protect the source, CreateVolume, create the PV, release.
func (p *Provisioner) provision(ctx context.Context, claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass, volName, selectedNode string) (err error) {
	start := time.Now()
	src := sourceOf(claim)
	// The class label is the claim's spec field, as upstream's: empty for a claim that names its class only by
	// the beta annotation.
	defer func() { p.Metrics.Provisioned(specClass(claim), string(src.kind), start, err) }()
	// Upstream's migrated="true" label on the CSI calls for a claim of an in-tree class (migration.go).
	ctx = csiconn.WithMigrated(ctx, p.migrating(class))

	if claim.Spec.Selector != nil {
		// As upstream: a dynamically provisioned volume has no labels to match, so a claim with a selector can
		// only be bound to an existing PV. Refused before any write; retrying waits the long interval.
		err := slow(errSelectorNotSupported)
		p.event(claim, v1.EventTypeWarning, ReasonProvisioningFailed, "failed to provision volume with StorageClass "+class.Name+": "+err.Error())
		return err
	}
	plan, err := p.planCreate(ctx, claim, class, volName, selectedNode)
	if err != nil {
		p.event(claim, v1.EventTypeWarning, ReasonProvisioningFailed, "failed to provision volume with StorageClass "+class.Name+": "+err.Error())
		return err
	}
	if !hasLegacyIntent(claim) {
		// Persisted, and acknowledged, before CreateVolume; amortized over the claims in flight (journal.go).
		if err := p.recordEntry(ctx, claim, plan, volName); err != nil {
			return err
		}
	}
	if err := p.protectSource(ctx, claim, plan); err != nil {
		return err
	}
	p.event(claim, v1.EventTypeNormal, ReasonProvisioning,
		fmt.Sprintf("External provisioner is provisioning volume for claim %q", claim.Namespace+"/"+claim.Name))

	resp, err := p.createVolume(ctx, plan.req)
	if err != nil {
		// A failed attempt may still have used space, and the scheduler's next pick should see the class's
		// capacity as it is now.
		p.refreshCapacity(class.Name, nil)
		return p.createFailed(ctx, claim, class, selectedNode, err)
	}
	vol := resp.GetVolume()
	if vol == nil || vol.VolumeId == "" {
		return fmt.Errorf("CreateVolume for %s returned no volume ID", volName)
	}
	// The new volume took space in its segments (or, with no topology, in its class's pool) now, not at the
	// next poll.
	p.refreshCapacity(class.Name, nodeAffinity(vol.AccessibleTopology))
	if err := p.checkCapacity(ctx, claim, plan, vol); err != nil {
		return err
	}
	if err := p.createPV(ctx, claim, class, plan, vol, volName); err != nil {
		return err
	}
	p.setClaimStage(claim, claimPVCreated)
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Provisioned volume", "pv", volName, "volumeID", vol.VolumeId)
	p.event(claim, v1.EventTypeNormal, ReasonProvisioningSucceeded, fmt.Sprintf("Successfully provisioned volume %s", volName))
	return p.finishProvisioning(ctx, claim)
}

// createFailed handles a failed CreateVolume: a claim whose selected node has no room goes back to the
// scheduler, an invalid request is retried at the long interval, anything else with backoff.
func (p *Provisioner) createFailed(ctx context.Context, claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass, selectedNode string, err error) error {
	p.event(claim, v1.EventTypeWarning, ReasonProvisioningFailed, "failed to provision volume with StorageClass "+class.Name+": "+err.Error())
	if isCode(err, codes.ResourceExhausted) && selectedNode != "" && p.cfg.Capabilities.Topology {
		// No room in the selected node's topology: hand the claim back to the scheduler. The volume was not
		// made, so a legacy intent goes in the same write, and the claim's entry with the next record write.
		if _, perr := p.mutateClaim(ctx, claim, func(c *v1.PersistentVolumeClaim) {
			delete(c.Annotations, annSelectedNode)
			delete(c.Annotations, IntentKey)
			c.Finalizers = slices.DeleteFunc(c.Finalizers, func(f string) bool { return f == IntentKey })
		}); perr != nil {
			return perr
		}
		p.clearEntry(claim.UID)
		return fmt.Errorf("CreateVolume: %w; claim sent back to the scheduler", err)
	}
	if isCode(err, codes.InvalidArgument) {
		return slow(fmt.Errorf("CreateVolume: %w", err))
	}
	// The journal entry stays: after a timeout the volume may still appear, and a final error now does not prove
	// that an earlier timed-out call made nothing.
	return fmt.Errorf("CreateVolume: %w", err)
}

// checkCapacity deletes a volume the driver made smaller than requested, and says so.
func (p *Provisioner) checkCapacity(ctx context.Context, claim *v1.PersistentVolumeClaim, plan *createPlan, vol *csi.Volume) error {
	if vol.CapacityBytes != 0 && vol.CapacityBytes < plan.req.CapacityRange.RequiredBytes {
		if derr := p.deleteVolume(ctx, vol.VolumeId, plan.req.Secrets); derr != nil {
			return fmt.Errorf("driver made volume %s smaller (%d) than requested (%d), and deleting it failed: %w", vol.VolumeId, vol.CapacityBytes, plan.req.CapacityRange.RequiredBytes, derr)
		}
		err := fmt.Errorf("driver made volume %s smaller (%d bytes) than requested (%d); deleted it", vol.VolumeId, vol.CapacityBytes, plan.req.CapacityRange.RequiredBytes)
		p.event(claim, v1.EventTypeWarning, ReasonProvisioningFailed, err.Error())
		return err
	}
	return nil
}

// createPV creates the claim's PV (in the in-tree plugin's form for a migrated class); one that already exists
// for this claim, from an earlier run, will do.
func (p *Provisioner) createPV(ctx context.Context, claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass, plan *createPlan, vol *csi.Volume, volName string) error {
	pv := p.buildPV(claim, class, plan, vol, volName)
	if p.migrating(class) {
		// As upstream: a migrated claim's PV is written in the in-tree plugin's form.
		var err error
		if pv, err = p.inTreePV(pv); err != nil {
			if derr := p.deleteVolume(ctx, vol.VolumeId, plan.req.Secrets); derr != nil {
				return fmt.Errorf("%w; deleting volume %s failed: %w", err, vol.VolumeId, derr)
			}
			p.event(claim, v1.EventTypeWarning, ReasonProvisioningFailed, err.Error()+"; deleted the volume")
			return slow(err)
		}
	}
	if _, err := p.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create PV %s: %w", volName, err)
		}
		existing, gerr := p.Kube.CoreV1().PersistentVolumes().Get(ctx, volName, metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("create PV %s: %w; get it: %w", volName, err, gerr)
		}
		if existing.Spec.ClaimRef == nil || existing.Spec.ClaimRef.UID != claim.UID {
			return slow(fmt.Errorf("PV %s already exists and belongs to another claim", volName))
		}
	}
	return nil
}

// finishProvisioning drops the claim's entry from the journal (with the record's next write: no write of its
// own), releases a legacy intent finalizer an older Stowage wrote (one claim Update), and then the source
// protection.
func (p *Provisioner) finishProvisioning(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	_, journaled := p.entry(claim.UID)
	if !journaled && !hasLegacyIntent(claim) {
		return nil
	}
	if hasLegacyIntent(claim) {
		if _, err := p.releaseLegacyIntent(ctx, claim); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
	}
	p.clearEntry(claim.UID)
	p.setClaimStage(claim, claimReleased)
	return p.releaseSource(ctx, claim)
}

// abandon undoes the job for a claim deleted while its volume was being provisioned. The volume's ID was maybe
// never returned to us, and a CSI volume ID is not its name, so CreateVolume is called again with the same name
// and request: it is idempotent, so it returns the volume if one exists, which is then deleted.
func (p *Provisioner) abandon(ctx context.Context, claim *v1.PersistentVolumeClaim, volName string) error {
	logger := klog.FromContext(ctx)
	if _, err := p.Kube.CoreV1().PersistentVolumes().Get(ctx, volName, metav1.GetOptions{}); err == nil {
		// The PV records the volume; its reclaim policy decides its fate once the binder releases it.
		return p.finishProvisioning(ctx, claim)
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get PV %s: %w", volName, err)
	}
	className := ClaimClass(claim)
	class, err := p.Classes.Get(className)
	if err == nil {
		class, err = p.csiClass(ctx, class)
		if err == nil && class == nil {
			err = fmt.Errorf("it names neither driver %s nor an in-tree plugin migrated to it", p.cfg.DriverName)
		}
	}
	if err != nil {
		err = fmt.Errorf("claim was deleted while volume %s was being provisioned; cannot rebuild the CreateVolume request to find and delete it: StorageClass %q: %w", volName, className, err)
		p.event(claim, v1.EventTypeWarning, ReasonProvisioningFailed, err.Error())
		return slow(err)
	}
	ctx = csiconn.WithMigrated(ctx, p.migrating(class))
	plan, err := p.planCreate(ctx, claim, class, volName, claim.Annotations[annSelectedNode])
	if err != nil {
		err = fmt.Errorf("claim was deleted while volume %s was being provisioned; cannot rebuild the CreateVolume request to find and delete it: %w", volName, err)
		p.event(claim, v1.EventTypeWarning, ReasonProvisioningFailed, err.Error())
		return err
	}
	resp, err := p.createVolume(ctx, plan.req)
	switch {
	case err != nil && maybeInProgress(err):
		return fmt.Errorf("clean-up CreateVolume for deleted claim: %w", err)
	case err != nil:
		// A final error for the same request: no volume of that name exists.
		logger.V(2).Info("Deleted claim left no volume", "volume", volName, "err", err)
	default:
		id := resp.GetVolume().GetVolumeId()
		if id == "" {
			return fmt.Errorf("clean-up CreateVolume for %s returned no volume ID", volName)
		}
		if err := p.deleteVolume(ctx, id, plan.req.Secrets); err != nil {
			p.event(claim, v1.EventTypeWarning, ReasonVolumeFailedDelete, fmt.Sprintf("deleting volume %s of deleted claim: %v", id, err))
			return err
		}
		logger.Info("Deleted the volume of a claim deleted during provisioning", "volume", volName, "volumeID", id)
	}
	return p.finishProvisioning(ctx, claim)
}

// createVolume calls CreateVolume under --timeout.
func (p *Provisioner) createVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	return p.CSI.CreateVolume(ctx, req)
}

// deleteVolume calls DeleteVolume under --timeout; NotFound means the work is done.
func (p *Provisioner) deleteVolume(ctx context.Context, id string, secrets map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	_, err := p.CSI.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id, Secrets: secrets})
	if err != nil && !isCode(err, codes.NotFound) {
		return fmt.Errorf("DeleteVolume %s: %w", id, err)
	}
	return nil
}

// buildPV is the PV for a created volume, laid out as upstream lays it out.
func (p *Provisioner) buildPV(claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass, plan *createPlan, vol *csi.Volume, volName string) *v1.PersistentVolume {
	size := plan.req.CapacityRange.RequiredBytes
	if vol.CapacityBytes > 0 {
		size = vol.CapacityBytes
	}
	attrs := map[string]string{provisionerIdentityKey: p.cfg.Identity}
	for k, v := range vol.VolumeContext {
		attrs[k] = v
	}
	reclaim := v1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	mode := modeOf(claim.Spec.VolumeMode)
	src := &v1.CSIPersistentVolumeSource{
		Driver:           p.cfg.DriverName,
		VolumeHandle:     vol.VolumeId,
		VolumeAttributes: attrs,
		ReadOnly:         p.cfg.ControllerPublishReadOnly && len(claim.Spec.AccessModes) == 1 && claim.Spec.AccessModes[0] == v1.ReadOnlyMany,
	}
	if !plan.block {
		src.FSType = plan.fsType
	}
	ref := func(kind secretKind) *v1.SecretReference {
		if r := plan.secrets[kind]; r != nil {
			return &v1.SecretReference{Name: r.name, Namespace: r.namespace}
		}
		return nil
	}
	src.ControllerPublishSecretRef = ref(secretControllerPublish)
	src.NodeStageSecretRef = ref(secretNodeStage)
	src.NodePublishSecretRef = ref(secretNodePublish)
	src.ControllerExpandSecretRef = ref(secretControllerExpand)
	src.NodeExpandSecretRef = ref(secretNodeExpand)

	// The class's provisioner, as upstream: the in-tree plugin's name for a migrated claim.
	ann := map[string]string{annProvisionedBy: class.Provisioner}
	if r := plan.secrets[secretProvisioner]; r != nil {
		ann[annDeletionSecretName], ann[annDeletionSecretNS] = r.name, r.namespace
	}
	if r := plan.secrets[secretControllerModify]; r != nil {
		ann[annModifySecretName], ann[annModifySecretNS] = r.name, r.namespace
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: volName, Annotations: ann, Finalizers: []string{VolumeFinalizer}},
		Spec: v1.PersistentVolumeSpec{
			AccessModes:                   claim.Spec.AccessModes,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)},
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class.Name,
			MountOptions:                  class.MountOptions,
			VolumeMode:                    &mode,
			NodeAffinity:                  nodeAffinity(vol.AccessibleTopology),
			PersistentVolumeSource:        v1.PersistentVolumeSource{CSI: src},
			ClaimRef: &v1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion,
			},
		},
	}
	if plan.attrClass != "" {
		pv.Spec.VolumeAttributesClassName = &plan.attrClass
	}
	return pv
}

// event records an Event on obj; the recorder is asynchronous, so this never blocks the worker.
func (p *Provisioner) event(obj runtime.Object, typ, reason, msg string) {
	if p.Recorder != nil {
		p.Recorder.Event(obj, typ, reason, msg)
	}
}

// specClass is the claim's spec.storageClassName, empty when unset.
func specClass(claim *v1.PersistentVolumeClaim) string {
	if claim.Spec.StorageClassName == nil {
		return ""
	}
	return *claim.Spec.StorageClassName
}
