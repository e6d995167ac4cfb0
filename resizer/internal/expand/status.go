package expand

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/resizer/internal/claimstatus"
)

// The claim's status writes. Each is one merge patch of persistentvolumeclaims/status (the only PVC write
// upstream's RBAC grants) preconditioned on the resourceVersion the decision was made on; upstream skips the
// precondition on its failure writes, which can overwrite a newer status.

// resizeConditions are the condition types the resizer owns; the others (ModifyingVolume...) are kept.
var resizeConditions = map[v1.PersistentVolumeClaimConditionType]bool{
	v1.PersistentVolumeClaimResizing:                true,
	v1.PersistentVolumeClaimFileSystemResizePending: true,
	v1.PersistentVolumeClaimControllerResizeError:   true,
}

// markInProgress records the size being expanded to (allocatedResources) and ControllerResizeInProgress
// before the CSI call, so a restarted resizer, or a user shrinking the request, knows a call may be running.
func (h *Handler) markInProgress(ctx context.Context, pvc *v1.PersistentVolumeClaim, size resource.Quantity) (*v1.PersistentVolumeClaim, error) {
	return h.writeStatus(ctx, pvc, func(p *v1.PersistentVolumeClaim) {
		setResizeState(p, v1.PersistentVolumeClaimControllerResizeInProgress)
		if p.Status.AllocatedResources == nil {
			p.Status.AllocatedResources = v1.ResourceList{}
		}
		p.Status.AllocatedResources[v1.ResourceStorage] = size
		p.Status.Conditions = h.mergeConditions(p.Status.Conditions, v1.PersistentVolumeClaimCondition{
			Type: v1.PersistentVolumeClaimResizing, Status: v1.ConditionTrue,
		})
	})
}

// markNodePending hands the claim to the kubelet: FileSystemResizePending and NodeResizePending. A stale
// node-expansion-not-required annotation goes in the same write.
func (h *Handler) markNodePending(ctx context.Context, pvc *v1.PersistentVolumeClaim) (*v1.PersistentVolumeClaim, error) {
	return h.writeStatus(ctx, pvc, func(p *v1.PersistentVolumeClaim) {
		setResizeState(p, v1.PersistentVolumeClaimNodeResizePending)
		p.Status.Conditions = h.mergeConditions(p.Status.Conditions, v1.PersistentVolumeClaimCondition{
			Type: v1.PersistentVolumeClaimFileSystemResizePending, Status: v1.ConditionTrue,
			Message: "Waiting for user to (re-)start a pod to finish file system resize of volume on node.",
		})
		delete(p.Annotations, NodeExpansionNotRequiredAnnotation)
	})
}

// markFinished ends an expansion the node need not finish: the new capacity, no resize conditions, no resize
// state, and the annotation that tells the kubelet not to expand the volume on its nodes.
func (h *Handler) markFinished(ctx context.Context, pvc *v1.PersistentVolumeClaim, size resource.Quantity) (*v1.PersistentVolumeClaim, error) {
	return h.writeStatus(ctx, pvc, func(p *v1.PersistentVolumeClaim) {
		if p.Status.Capacity == nil {
			p.Status.Capacity = v1.ResourceList{}
		}
		p.Status.Capacity[v1.ResourceStorage] = size
		p.Status.Conditions = h.mergeConditions(p.Status.Conditions)
		delete(p.Status.AllocatedResourceStatuses, v1.ResourceStorage)
		if len(p.Status.AllocatedResourceStatuses) == 0 {
			p.Status.AllocatedResourceStatuses = nil
		}
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[NodeExpansionNotRequiredAnnotation] = "true"
	})
}

// markInfeasible records that the driver refused the size for good: ControllerResizeInfeasible, which lets
// the user ask for less, and a ControllerResizeError condition with the driver's message.
func (h *Handler) markInfeasible(ctx context.Context, pvc *v1.PersistentVolumeClaim, cause error) (*v1.PersistentVolumeClaim, error) {
	return h.writeStatus(ctx, pvc, func(p *v1.PersistentVolumeClaim) {
		setResizeState(p, v1.PersistentVolumeClaimControllerResizeInfeasible)
		p.Status.Conditions = h.mergeConditions(p.Status.Conditions, errorCondition(cause))
	})
}

// markFailedCondition records a final, not infeasible, failure; the state stays ControllerResizeInProgress.
func (h *Handler) markFailedCondition(ctx context.Context, pvc *v1.PersistentVolumeClaim, cause error) (*v1.PersistentVolumeClaim, error) {
	return h.writeStatus(ctx, pvc, func(p *v1.PersistentVolumeClaim) {
		p.Status.Conditions = h.mergeConditions(p.Status.Conditions, errorCondition(cause))
	})
}

func errorCondition(cause error) v1.PersistentVolumeClaimCondition {
	return v1.PersistentVolumeClaimCondition{
		Type: v1.PersistentVolumeClaimControllerResizeError, Status: v1.ConditionTrue,
		Message: "CSI resizer failed to resize volume: " + cause.Error(),
	}
}

// writeStatus patches the claim's status with mutate (claimstatus.Write).
func (h *Handler) writeStatus(ctx context.Context, pvc *v1.PersistentVolumeClaim, mutate func(*v1.PersistentVolumeClaim)) (*v1.PersistentVolumeClaim, error) {
	return claimstatus.Write(ctx, h.cfg.Client, h.writes, pvc, mutate)
}

func setResizeState(p *v1.PersistentVolumeClaim, state v1.ClaimResourceStatus) {
	if p.Status.AllocatedResourceStatuses == nil {
		p.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{}
	}
	p.Status.AllocatedResourceStatuses[v1.ResourceStorage] = state
}

// mergeConditions replaces the resizer's conditions with want and keeps the others. A condition that was
// already there with the same status and message keeps its transition time, so a retry writes nothing new.
func (h *Handler) mergeConditions(current []v1.PersistentVolumeClaimCondition, want ...v1.PersistentVolumeClaimCondition) []v1.PersistentVolumeClaimCondition {
	var out []v1.PersistentVolumeClaimCondition
	old := map[v1.PersistentVolumeClaimConditionType]v1.PersistentVolumeClaimCondition{}
	for _, c := range current {
		if resizeConditions[c.Type] {
			old[c.Type] = c
			continue
		}
		out = append(out, c)
	}
	for _, c := range want {
		if o, ok := old[c.Type]; ok && o.Status == c.Status && o.Message == c.Message {
			c.LastTransitionTime = o.LastTransitionTime
			c.LastProbeTime = o.LastProbeTime
		} else {
			c.LastTransitionTime = metav1.NewTime(h.cfg.Now())
		}
		out = append(out, c)
	}
	return out
}
