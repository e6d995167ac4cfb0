// Package expand grows claims' volumes: ControllerExpandVolume when a bound claim asks for more than its
// volume has, the handoff to the node (FileSystemResizePending, NodeResizePending), and the recovery state
// machine of RecoverVolumeExpansionFailure over status.allocatedResources and
// status.allocatedResourceStatuses, which lets a user shrink a request that failed.
package expand

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/resizer/internal/csiresize"
	"github.com/stowage-csi/stowage/resizer/internal/slow"
	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/ownwrites"
	"github.com/stowage-csi/stowage/shared/patch"
)

// Upstream's annotation and Event reasons (external-resizer pkg/util).
const (
	// PreResizeCapacityAnnotation is set on a PersistentVolume whose filesystem still has to grow on the node,
	// to the claim's capacity before the resize (AnnotateFsResize); the PV controller reads it when it binds the
	// volume again.
	PreResizeCapacityAnnotation = "volume.alpha.kubernetes.io/pre-resize-capacity"
	// NodeExpansionNotRequiredAnnotation on a claim tells the kubelet the driver needs no node expansion.
	NodeExpansionNotRequiredAnnotation = "volume.kubernetes.io/node-expansion-not-required"

	ReasonResizing                 = "Resizing"
	ReasonResizeFailed             = "VolumeResizeFailed"
	ReasonFileSystemResizeRequired = "FileSystemResizeRequired"
	ReasonResizeSuccessful         = "VolumeResizeSuccessful"
)

// staleRetry is how soon a claim whose cached copy predates our own write is looked at again.
const staleRetry = 100 * time.Millisecond

// InUse tells whether a running Pod uses a claim (--handle-volume-inuse-error).
type InUse interface {
	Used(namespace, claim string) bool
}

// Config is what the handler needs.
type Config struct {
	Driver   string
	Client   kubernetes.Interface
	PVLister corelisters.PersistentVolumeLister
	Resizer  Resizer
	Events   record.EventRecorder
	// AnnotateFsResize is upstream's gate of that name.
	AnnotateFsResize bool
	// InUse is nil without --handle-volume-inuse-error: a FailedPrecondition is then retried like any error.
	InUse InUse
	// Slow holds infeasible expansions until --retry-interval-max has passed.
	Slow *slow.Set
	// Now stamps conditions; nil means time.Now.
	Now func() time.Time
}

// Handler expands claims; its methods are safe for concurrent use on different claims.
type Handler struct {
	cfg    Config
	writes *ownwrites.Writes
	// finalErrors and inUseErrors are upstream's finalErrorPVCs and usedPVCs: claims whose last
	// ControllerExpandVolume surely failed, and those it refused because the volume was in use.
	finalErrors *keySet
	inUseErrors *keySet
}

// New returns the handler.
func New(cfg Config) *Handler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{cfg: cfg, writes: ownwrites.New(), finalErrors: newKeySet(), inUseErrors: newKeySet()}
}

// Sync converges one claim. A positive duration asks to be called again after it without that counting as
// a failure (a stale cache, an infeasible request waiting out its delay).
func (h *Handler) Sync(ctx context.Context, pvc *v1.PersistentVolumeClaim) (time.Duration, error) {
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != v1.ClaimBound || pvc.DeletionTimestamp != nil {
		return 0, nil
	}
	pv, err := h.cfg.PVLister.Get(pvc.Spec.VolumeName)
	if err != nil {
		// The claim is queued again when its volume shows up: the controller watches volumes too.
		klog.FromContext(ctx).V(4).Info("Volume of claim not in cache", "pv", pvc.Spec.VolumeName, "err", err)
		return 0, nil
	}
	if !h.handles(pvc, pv) {
		return 0, nil
	}
	if h.writes.Stale(pvc) || h.writes.Stale(pv) {
		return staleRetry, nil
	}
	if err := h.dropPreResizeCapacity(ctx, pvc, pv); err != nil {
		return 0, err
	}
	if !needsResize(pvc) {
		return 0, nil
	}
	return h.expand(ctx, pvc, pv)
}

// Forget drops what the handler remembers about a deleted claim.
func (h *Handler) Forget(key string, pvc *v1.PersistentVolumeClaim) {
	h.writes.Forget(pvc.UID)
	h.finalErrors.remove(key)
	h.inUseErrors.remove(key)
	h.cfg.Slow.Remove(key)
}

// handles reports whether pv is a volume of this driver bound to pvc.
func (h *Handler) handles(pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) bool {
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != h.cfg.Driver {
		return false
	}
	ref := pv.Spec.ClaimRef
	return ref != nil && ref.Namespace == pvc.Namespace && ref.UID == pvc.UID
}

// dropPreResizeCapacity removes the AnnotateFsResize annotation once the node has expanded the filesystem
// (the claim's capacity reached the volume's), as upstream does.
func (h *Handler) dropPreResizeCapacity(ctx context.Context, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) error {
	if !h.cfg.AnnotateFsResize {
		return nil
	}
	if _, ok := pv.Annotations[PreResizeCapacityAnnotation]; !ok {
		return nil
	}
	claimed, volume := pvc.Status.Capacity[v1.ResourceStorage], pv.Spec.Capacity[v1.ResourceStorage]
	if claimed.Cmp(volume) < 0 {
		return nil
	}
	updated, err := patch.RemoveAnnotation(ctx, h.cfg.Client.CoreV1().PersistentVolumes().Patch, pv, PreResizeCapacityAnnotation)
	if err != nil {
		return fmt.Errorf("persistentvolume %s: removing annotation %s: %w", pv.Name, PreResizeCapacityAnnotation, err)
	}
	h.writes.Wrote(pv, updated)
	return nil
}

// needsResize reports whether the claim asks for more than it has.
func needsResize(pvc *v1.PersistentVolumeClaim) bool {
	want, have := pvc.Spec.Resources.Requests[v1.ResourceStorage], pvc.Status.Capacity[v1.ResourceStorage]
	return want.Cmp(have) > 0
}

// expand runs one expansion of pvc's volume to the size target picks.
func (h *Handler) expand(ctx context.Context, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	key := pvc.Namespace + "/" + pvc.Name
	size, act := h.target(key, pvc, pv)
	if !act {
		return 0, nil
	}
	state := pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage]
	if state == v1.PersistentVolumeClaimControllerResizeInfeasible {
		// After a restart the infeasible size still waits, as upstream's markForSlowRetry.
		if allocated, ok := pvc.Status.AllocatedResources[v1.ResourceStorage]; ok {
			h.cfg.Slow.Add(key, allocated.String())
		}
	}
	writeStatus := true
	if allocated, ok := pvc.Status.AllocatedResources[v1.ResourceStorage]; ok && allocated.Cmp(size) == 0 {
		if left := h.cfg.Slow.Remaining(key, size.String()); left > 0 {
			logger.V(4).Info("Expansion failed as infeasible before, waiting", "size", size.String(), "retryIn", left)
			return left, nil
		}
		// Same size as recorded already: no status write, only the CSI call again.
		writeStatus = state == ""
	}
	if writeStatus {
		updated, err := h.markInProgress(ctx, pvc, size)
		if err != nil {
			return 0, fmt.Errorf("persistentvolumeclaim %s: marking the resize in progress: %w", key, err)
		}
		pvc = updated
	}
	if h.cfg.InUse != nil && h.inUseErrors.has(key) && h.cfg.InUse.Used(pvc.Namespace, pvc.Name) {
		msg := fmt.Sprintf("Unable to expand %s because CSI driver %s only supports offline expansion and volume is currently in-use", key, h.cfg.Driver)
		h.cfg.Events.Event(pvc, v1.EventTypeWarning, ReasonResizeFailed, msg)
		return 0, fmt.Errorf("persistentvolumeclaim %s: %s", key, msg)
	}
	h.cfg.Events.Event(pvc, v1.EventTypeNormal, ReasonResizing, fmt.Sprintf("External resizer is resizing volume %s", pv.Name))
	h.inUseErrors.remove(key)

	newSize, nodeExpansion, err := h.cfg.Resizer.Resize(ctx, pv, size)
	if err != nil {
		return h.failed(ctx, key, pvc, pv, size, err)
	}
	h.finalErrors.remove(key)
	h.cfg.Slow.Remove(key)
	oldSize := pvc.Status.Capacity[v1.ResourceStorage]
	if err := h.updateVolume(ctx, pv, oldSize, newSize, nodeExpansion); err != nil {
		return 0, err
	}
	if nodeExpansion {
		if _, err := h.markNodePending(ctx, pvc); err != nil {
			return 0, fmt.Errorf("persistentvolumeclaim %s: marking node expansion pending: %w", key, err)
		}
		h.cfg.Events.Event(pvc, v1.EventTypeNormal, ReasonFileSystemResizeRequired, "Require file system resize of volume on node")
		logger.V(2).Info("Volume expanded, node expansion pending", "pv", pv.Name, "size", newSize.String())
		return 0, nil
	}
	if _, err := h.markFinished(ctx, pvc, newSize); err != nil {
		return 0, fmt.Errorf("persistentvolumeclaim %s: marking the resize finished: %w", key, err)
	}
	h.cfg.Events.Event(pvc, v1.EventTypeNormal, ReasonResizeSuccessful, "Resize volume succeeded")
	logger.V(2).Info("Volume expanded", "pv", pv.Name, "size", newSize.String())
	return 0, nil
}

// target picks the size to expand to and whether to act at all, as upstream's expandAndRecover: an
// expansion the driver may still be running (uncertain) or the node has still to finish is completed at the
// size it was started with before the user's newer (possibly smaller) request is served.
func (h *Handler) target(key string, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) (resource.Quantity, bool) {
	spec := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	volume := pv.Spec.Capacity[v1.ResourceStorage]
	allocated, hasAllocated := pvc.Status.AllocatedResources[v1.ResourceStorage]
	state := pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage]
	size := spec
	if volume.Cmp(spec) < 0 {
		switch state {
		case v1.PersistentVolumeClaimNodeResizeInfeasible:
			if hasAllocated {
				size = allocated
			}
		case v1.PersistentVolumeClaimNodeResizePending, v1.PersistentVolumeClaimNodeResizeInProgress:
			if hasAllocated {
				size = allocated
			}
			if volume.Cmp(size) >= 0 {
				return size, false // the node finishes the previous expansion first
			}
		case v1.PersistentVolumeClaimControllerResizeInProgress:
			// A final error means the driver did nothing: the user's (maybe smaller) request may be served.
			// Otherwise the earlier call may still be running and must be finished at its size.
			if !h.finalErrors.has(key) && hasAllocated {
				size = allocated
			}
		}
		return size, true
	}
	switch state {
	case v1.PersistentVolumeClaimNodeResizePending, v1.PersistentVolumeClaimNodeResizeInProgress:
		return size, false
	case v1.PersistentVolumeClaimNodeResizeInfeasible:
		if h.cfg.Resizer.ControllerExpands() && hasAllocated {
			size = allocated
		}
	case v1.PersistentVolumeClaimControllerResizeInProgress, v1.PersistentVolumeClaimControllerResizeInfeasible:
		if hasAllocated {
			size = allocated
		}
	default:
		if hasAllocated {
			size = allocated
		} else if hasCondition(pvc, v1.PersistentVolumeClaimFileSystemResizePending) {
			return size, false
		}
	}
	return size, true
}

// failed records a failed ControllerExpandVolume: infeasible sizes wait --retry-interval-max, other final
// errors are retried with backoff, and uncertain ones keep the size they were started with.
func (h *Handler) failed(ctx context.Context, key string, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, size resource.Quantity, cause error) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	if csiresize.IsInUse(cause) {
		h.inUseErrors.add(key)
	}
	cause = fmt.Errorf("resize volume %q by resizer %q failed: %w", pv.Name, h.cfg.Driver, cause)
	h.cfg.Events.Event(pvc, v1.EventTypeWarning, ReasonResizeFailed, cause.Error())
	if !csiconn.IsFinal(cause) {
		h.finalErrors.remove(key)
		h.cfg.Slow.Remove(key)
		return 0, cause
	}
	h.finalErrors.add(key)
	if csiresize.IsExpandInfeasible(cause) {
		if _, err := h.markInfeasible(ctx, pvc, cause); err != nil {
			return 0, fmt.Errorf("%w; and marking persistentvolumeclaim %s infeasible: %w", cause, key, err)
		}
		h.cfg.Slow.Add(key, size.String())
		left := h.cfg.Slow.Remaining(key, size.String())
		logger.Error(cause, "Expansion is infeasible, retrying slowly", "size", size.String(), "retryIn", left)
		return left, nil
	}
	h.cfg.Slow.Remove(key)
	if _, err := h.markFailedCondition(ctx, pvc, cause); err != nil {
		return 0, fmt.Errorf("%w; and recording it on persistentvolumeclaim %s: %w", cause, key, err)
	}
	return 0, cause
}

// updateVolume writes the new capacity to the PersistentVolume, with the pre-resize capacity annotation when
// the node still has to grow the filesystem.
func (h *Handler) updateVolume(ctx context.Context, pv *v1.PersistentVolume, oldSize, newSize resource.Quantity, nodeExpansion bool) error {
	volumes := h.cfg.Client.CoreV1().PersistentVolumes()
	mutate := func(p *v1.PersistentVolume) {
		if p.Spec.Capacity == nil {
			p.Spec.Capacity = v1.ResourceList{}
		}
		p.Spec.Capacity[v1.ResourceStorage] = newSize
		if nodeExpansion && h.cfg.AnnotateFsResize {
			if _, ok := p.Annotations[PreResizeCapacityAnnotation]; !ok {
				if p.Annotations == nil {
					p.Annotations = map[string]string{}
				}
				p.Annotations[PreResizeCapacityAnnotation] = oldSize.String()
			}
		}
	}
	// A conflict (the modify worker set the volume's class meanwhile) re-reads the volume and applies the
	// capacity to it, rather than failing the sync and calling the driver again.
	_, err := patch.RetryOnConflict(ctx, pv,
		func(ctx context.Context) (*v1.PersistentVolume, error) {
			return volumes.Get(ctx, pv.Name, metav1.GetOptions{})
		},
		func(ctx context.Context, cur *v1.PersistentVolume) (*v1.PersistentVolume, error) {
			out, err := patch.Mutate(ctx, volumes.Patch, cur, mutate)
			if err == nil {
				h.writes.Wrote(cur, out)
			}
			return out, err
		})
	if err != nil {
		return fmt.Errorf("persistentvolume %s: updating spec.capacity to %s: %w", pv.Name, newSize.String(), err)
	}
	return nil
}

func hasCondition(pvc *v1.PersistentVolumeClaim, t v1.PersistentVolumeClaimConditionType) bool {
	for _, c := range pvc.Status.Conditions {
		if c.Type == t && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

// keySet is a concurrent set of claim keys.
type keySet struct {
	mu   sync.Mutex
	keys sets.Set[string]
}

func newKeySet() *keySet { return &keySet{keys: sets.New[string]()} }

func (s *keySet) add(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys.Insert(k)
}

func (s *keySet) remove(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys.Delete(k)
}

func (s *keySet) has(k string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys.Has(k)
}
