package modify

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/resizer/internal/claimstatus"
	"github.com/stowage-csi/stowage/shared/patch"
)

// markInProgress records the target class before the CSI call, with a ModifyingVolume condition.
func (h *Handler) markInProgress(ctx context.Context, pvc *v1.PersistentVolumeClaim, want string) (*v1.PersistentVolumeClaim, error) {
	return h.writeStatus(ctx, pvc, func(p *v1.PersistentVolumeClaim) {
		p.Status.ModifyVolumeStatus = &v1.ModifyVolumeStatus{TargetVolumeAttributesClassName: want, Status: v1.PersistentVolumeClaimModifyVolumeInProgress}
		p.Status.Conditions = h.mergeConditions(p.Status.Conditions, v1.PersistentVolumeClaimCondition{
			Type: v1.PersistentVolumeClaimVolumeModifyingVolume, Status: v1.ConditionTrue, Message: "ModifyVolume operation in progress.",
		})
	})
}

// complete records the applied class: on the PersistentVolume first (so a crash between the two writes
// repeats the idempotent call instead of leaving the volume's class behind), then on the claim, clearing
// modifyVolumeStatus and the modify conditions.
func (h *Handler) complete(ctx context.Context, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, want string) error {
	volumes := h.cfg.Client.CoreV1().PersistentVolumes()
	// A conflict (the expand worker set the volume's capacity meanwhile) re-reads the volume and sets the class
	// on it, rather than failing the sync and calling the driver again.
	_, err := patch.RetryOnConflict(ctx, pv,
		func(ctx context.Context) (*v1.PersistentVolume, error) {
			return volumes.Get(ctx, pv.Name, metav1.GetOptions{})
		},
		func(ctx context.Context, cur *v1.PersistentVolume) (*v1.PersistentVolume, error) {
			out, err := patch.Mutate(ctx, volumes.Patch, cur, func(p *v1.PersistentVolume) { p.Spec.VolumeAttributesClassName = &want })
			if err == nil {
				h.writes.Wrote(cur, out)
			}
			return out, err
		})
	if err != nil {
		return fmt.Errorf("persistentvolume %s: setting spec.volumeAttributesClassName to %s: %w", pv.Name, want, err)
	}
	if _, err := h.writeStatus(ctx, pvc, func(p *v1.PersistentVolumeClaim) {
		p.Status.CurrentVolumeAttributesClassName = &want
		p.Status.ModifyVolumeStatus = nil
		p.Status.Conditions = withoutModifyConditions(p.Status.Conditions)
	}); err != nil {
		return fmt.Errorf("persistentvolumeclaim %s/%s: setting status.currentVolumeAttributesClassName to %s: %w", pvc.Namespace, pvc.Name, want, err)
	}
	return nil
}

// writeStatus patches the claim's status with mutate (claimstatus.Write).
func (h *Handler) writeStatus(ctx context.Context, pvc *v1.PersistentVolumeClaim, mutate func(*v1.PersistentVolumeClaim)) (*v1.PersistentVolumeClaim, error) {
	return claimstatus.Write(ctx, h.cfg.Client, h.writes, pvc, mutate)
}

func isModifyCondition(t v1.PersistentVolumeClaimConditionType) bool {
	return t == v1.PersistentVolumeClaimVolumeModifyingVolume || t == v1.PersistentVolumeClaimVolumeModifyVolumeError
}

func withoutModifyConditions(conds []v1.PersistentVolumeClaimCondition) []v1.PersistentVolumeClaimCondition {
	var out []v1.PersistentVolumeClaimCondition
	for _, c := range conds {
		if !isModifyCondition(c.Type) {
			out = append(out, c)
		}
	}
	return out
}

// mergeConditions replaces the modify conditions with want, keeping the transition time of one that did not
// change, and keeps the rest.
func (h *Handler) mergeConditions(current []v1.PersistentVolumeClaimCondition, want ...v1.PersistentVolumeClaimCondition) []v1.PersistentVolumeClaimCondition {
	old := map[v1.PersistentVolumeClaimConditionType]v1.PersistentVolumeClaimCondition{}
	for _, c := range current {
		if isModifyCondition(c.Type) {
			old[c.Type] = c
		}
	}
	out := withoutModifyConditions(current)
	for _, c := range want {
		if o, ok := old[c.Type]; ok && o.Status == c.Status && o.Message == c.Message {
			c.LastTransitionTime = o.LastTransitionTime
		} else {
			c.LastTransitionTime = metav1.NewTime(h.cfg.Now())
		}
		out = append(out, c)
	}
	return out
}
