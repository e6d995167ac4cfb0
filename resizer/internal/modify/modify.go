// Package modify applies VolumeAttributesClasses: when a claim's spec.volumeAttributesClassName differs from
// status.currentVolumeAttributesClassName it calls ControllerModifyVolume with the class's parameters and
// reports progress in status.modifyVolumeStatus (Pending while the class does not exist, InProgress,
// Infeasible when the driver refuses it); a user who sets the class back to the current one rolls back.
package modify

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/resizer/internal/csiresize"
	"github.com/stowage-csi/stowage/resizer/internal/slow"
	"github.com/stowage-csi/stowage/shared/kubeclient"
	"github.com/stowage-csi/stowage/shared/ownwrites"
)

// Upstream's keys and Event reasons.
const (
	// Extra metadata (--extra-modify-metadata) added to the mutable parameters.
	PVCNameKey      = "csi.storage.k8s.io/pvc/name"
	PVCNamespaceKey = "csi.storage.k8s.io/pvc/namespace"
	PVNameKey       = "csi.storage.k8s.io/pv/name"
	// The PersistentVolume annotations naming the controller-modify secret; without them the
	// controllerExpandSecretRef is used.
	SecretNameAnnotation      = "volume.kubernetes.io/controller-modify-secret-name"
	SecretNamespaceAnnotation = "volume.kubernetes.io/controller-modify-secret-namespace"

	ReasonModify           = "VolumeModify"
	ReasonModifyFailed     = "VolumeModifyFailed"
	ReasonModifySuccessful = "VolumeModifySuccessful"
	ReasonModifyCanceled   = "VolumeModifyCanceled"
)

const staleRetry = 100 * time.Millisecond

// Modifier is the CSI side: ControllerModifyVolume.
type Modifier interface {
	Modify(ctx context.Context, req *csi.ControllerModifyVolumeRequest) error
}

// Config is what the handler needs.
type Config struct {
	Driver    string
	Client    kubernetes.Interface
	PVLister  corelisters.PersistentVolumeLister
	VACLister storagelisters.VolumeAttributesClassLister
	CSI       Modifier
	Events    record.EventRecorder
	// ExtraMetadata is --extra-modify-metadata.
	ExtraMetadata bool
	// Slow holds infeasible classes until --retry-interval-max has passed.
	Slow *slow.Set
	Now  func() time.Time
}

// Handler modifies claims' volumes; safe for concurrent use on different claims.
type Handler struct {
	cfg    Config
	writes *ownwrites.Writes
}

// New returns the handler.
func New(cfg Config) *Handler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{cfg: cfg, writes: ownwrites.New()}
}

// Forget drops what the handler remembers about a deleted claim.
func (h *Handler) Forget(key string, pvc *v1.PersistentVolumeClaim) {
	h.writes.Forget(pvc.UID)
	h.cfg.Slow.Remove(key)
}

// Sync converges one claim; a positive duration asks to be called again after it.
func (h *Handler) Sync(ctx context.Context, pvc *v1.PersistentVolumeClaim) (time.Duration, error) {
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != v1.ClaimBound || pvc.DeletionTimestamp != nil {
		return 0, nil
	}
	pv, err := h.cfg.PVLister.Get(pvc.Spec.VolumeName)
	if err != nil {
		return 0, nil // queued again when the volume shows up
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != h.cfg.Driver || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		return 0, nil
	}
	if h.writes.Stale(pvc) || h.writes.Stale(pv) {
		return staleRetry, nil
	}
	want, current := deref(pvc.Spec.VolumeAttributesClassName), deref(pvc.Status.CurrentVolumeAttributesClassName)
	switch {
	case want == current && pvc.Status.ModifyVolumeStatus == nil:
		return 0, nil
	case want == current:
		return 0, h.rollback(ctx, pvc, pv)
	case want == "":
		// The class cannot be removed once applied (API validation); nothing to do.
		return 0, nil
	}
	return h.modify(ctx, pvc, pv, want)
}

// modify applies class want to the volume.
func (h *Handler) modify(ctx context.Context, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, want string) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	key := pvc.Namespace + "/" + pvc.Name
	vac, err := h.cfg.VACLister.Get(want)
	if apierrors.IsNotFound(err) {
		// Queued again when the class is created.
		_, err := h.writeStatus(ctx, pvc, func(p *v1.PersistentVolumeClaim) {
			p.Status.ModifyVolumeStatus = &v1.ModifyVolumeStatus{TargetVolumeAttributesClassName: want, Status: v1.PersistentVolumeClaimModifyVolumePending}
		})
		if err != nil {
			return 0, fmt.Errorf("persistentvolumeclaim %s: marking modification Pending: %w", key, err)
		}
		logger.V(2).Info("VolumeAttributesClass does not exist, modification pending", "volumeAttributesClass", want)
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("volumeattributesclass %s: %w", want, err)
	}
	if left := h.cfg.Slow.Remaining(key, want); left > 0 {
		logger.V(4).Info("Modification failed as infeasible before, waiting", "volumeAttributesClass", want, "retryIn", left)
		return left, nil
	}
	if vac.DriverName != h.cfg.Driver {
		cause := fmt.Errorf("volumeattributesclass %s: driverName %q is not this driver (%s)", want, vac.DriverName, h.cfg.Driver)
		return h.infeasible(ctx, key, pvc, want, cause)
	}
	if s := pvc.Status.ModifyVolumeStatus; s == nil || s.Status != v1.PersistentVolumeClaimModifyVolumeInProgress || s.TargetVolumeAttributesClassName != want {
		if pvc, err = h.markInProgress(ctx, pvc, want); err != nil {
			return 0, fmt.Errorf("persistentvolumeclaim %s: marking modification InProgress: %w", key, err)
		}
		h.cfg.Events.Event(pvc, v1.EventTypeNormal, ReasonModify, fmt.Sprintf("external resizer is modifying volume %s with vac %s", pvc.Name, want))
	}
	if err := h.call(ctx, pvc, pv, vac); err != nil {
		return h.failed(ctx, key, pvc, want, err)
	}
	h.cfg.Slow.Remove(key)
	if err := h.complete(ctx, pvc, pv, want); err != nil {
		return 0, err
	}
	h.cfg.Events.Event(pvc, v1.EventTypeNormal, ReasonModifySuccessful, fmt.Sprintf("external resizer modified volume %s with vac %s successfully", pvc.Name, want))
	logger.V(2).Info("Volume modified", "volumeAttributesClass", want)
	return 0, nil
}

// rollback handles a claim whose class was set back to the current one while a modification was pending,
// infeasible or in progress. Pending and infeasible modifications never reached the volume and are only
// cleared; one in progress may have been partly applied, so the current class is applied again first.
func (h *Handler) rollback(ctx context.Context, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) error {
	key := pvc.Namespace + "/" + pvc.Name
	current := deref(pvc.Status.CurrentVolumeAttributesClassName)
	abandoned := pvc.Status.ModifyVolumeStatus.TargetVolumeAttributesClassName
	if pvc.Status.ModifyVolumeStatus.Status == v1.PersistentVolumeClaimModifyVolumeInProgress && current != "" {
		vac, err := h.cfg.VACLister.Get(current)
		if err != nil {
			return fmt.Errorf("persistentvolumeclaim %s: rolling back to volumeattributesclass %s: %w", key, current, err)
		}
		if err := h.call(ctx, pvc, pv, vac); err != nil {
			h.cfg.Events.Event(pvc, v1.EventTypeWarning, ReasonModifyFailed, err.Error())
			return fmt.Errorf("persistentvolumeclaim %s: rolling back to volumeattributesclass %s: %w", key, current, err)
		}
	}
	if _, err := h.writeStatus(ctx, pvc, func(p *v1.PersistentVolumeClaim) {
		p.Status.ModifyVolumeStatus = nil
		p.Status.Conditions = withoutModifyConditions(p.Status.Conditions)
	}); err != nil {
		return fmt.Errorf("persistentvolumeclaim %s: clearing modifyVolumeStatus: %w", key, err)
	}
	h.cfg.Slow.Remove(key)
	h.cfg.Events.Event(pvc, v1.EventTypeNormal, ReasonModifyCanceled,
		fmt.Sprintf("modification of volume %s to vac %s canceled, vac %q kept", pvc.Name, abandoned, current))
	return nil
}

// call sends ControllerModifyVolume with the class's parameters, never changing the cached class.
func (h *Handler) call(ctx context.Context, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, vac *storagev1.VolumeAttributesClass) error {
	params := maps.Clone(vac.Parameters)
	if params == nil {
		params = map[string]string{}
	}
	if h.cfg.ExtraMetadata {
		params[PVCNameKey] = pvc.Name
		params[PVCNamespaceKey] = pvc.Namespace
		params[PVNameKey] = pv.Name
	}
	req := &csi.ControllerModifyVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle, MutableParameters: params}
	secrets, err := kubeclient.CSISecrets(ctx, h.cfg.Client, secretRef(pv))
	if err != nil {
		return fmt.Errorf("persistentvolume %s: reading the controller-modify %w", pv.Name, err)
	}
	req.Secrets = secrets
	return h.cfg.CSI.Modify(ctx, req)
}

// failed records a failed ControllerModifyVolume: InvalidArgument makes the class Infeasible and waits
// --retry-interval-max; other errors keep InProgress and are retried with backoff.
func (h *Handler) failed(ctx context.Context, key string, pvc *v1.PersistentVolumeClaim, want string, cause error) (time.Duration, error) {
	if csiresize.IsModifyInfeasible(cause) {
		return h.infeasible(ctx, key, pvc, want, cause)
	}
	h.cfg.Events.Event(pvc, v1.EventTypeWarning, ReasonModifyFailed, cause.Error())
	if _, err := h.writeStatus(ctx, pvc, func(p *v1.PersistentVolumeClaim) {
		p.Status.Conditions = h.mergeConditions(p.Status.Conditions, v1.PersistentVolumeClaimCondition{
			Type: v1.PersistentVolumeClaimVolumeModifyVolumeError, Status: v1.ConditionTrue,
			Message: "ModifyVolume failed with error: " + cause.Error() + ". Waiting for retry.",
		})
	}); err != nil {
		return 0, fmt.Errorf("%w; and recording it on persistentvolumeclaim %s: %w", cause, key, err)
	}
	return 0, fmt.Errorf("persistentvolumeclaim %s: modifying to volumeattributesclass %s: %w", key, want, cause)
}

// infeasible marks the class Infeasible with an Event, and parks the claim for --retry-interval-max.
func (h *Handler) infeasible(ctx context.Context, key string, pvc *v1.PersistentVolumeClaim, want string, cause error) (time.Duration, error) {
	h.cfg.Events.Event(pvc, v1.EventTypeWarning, ReasonModifyFailed, cause.Error())
	if _, err := h.writeStatus(ctx, pvc, func(p *v1.PersistentVolumeClaim) {
		p.Status.ModifyVolumeStatus = &v1.ModifyVolumeStatus{TargetVolumeAttributesClassName: want, Status: v1.PersistentVolumeClaimModifyVolumeInfeasible}
		p.Status.Conditions = h.mergeConditions(p.Status.Conditions, v1.PersistentVolumeClaimCondition{
			Type: v1.PersistentVolumeClaimVolumeModifyVolumeError, Status: v1.ConditionTrue,
			Message: "ModifyVolume failed with error: " + cause.Error() + ". Waiting for retry.",
		})
	}); err != nil {
		return 0, fmt.Errorf("%w; and marking persistentvolumeclaim %s Infeasible: %w", cause, key, err)
	}
	h.cfg.Slow.Add(key, want)
	left := h.cfg.Slow.Remaining(key, want)
	klog.FromContext(ctx).Error(cause, "Modification is infeasible, retrying slowly", "volumeAttributesClass", want, "retryIn", left)
	return left, nil
}

func secretRef(pv *v1.PersistentVolume) *v1.SecretReference {
	name, namespace := pv.Annotations[SecretNameAnnotation], pv.Annotations[SecretNamespaceAnnotation]
	if name != "" && namespace != "" {
		return &v1.SecretReference{Name: name, Namespace: namespace}
	}
	return pv.Spec.CSI.ControllerExpandSecretRef
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
