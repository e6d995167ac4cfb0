package kubeletsim

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// expansionPending tells whether the claim waits for the node to grow the file system: the resize
// controller marks it with allocatedResourceStatuses[storage]=NodeResizePending, or with the older
// FileSystemResizePending condition.
func expansionPending(c *v1.PersistentVolumeClaim) bool {
	if c.Status.AllocatedResourceStatuses[v1.ResourceStorage] == v1.PersistentVolumeClaimNodeResizePending {
		return true
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type == v1.PersistentVolumeClaimFileSystemResizePending && cond.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

// expandIfNeeded calls NodeExpandVolume for a published claim whose expansion waits for the node, then
// records the new size in the claim's status and clears the pending markers, as the kubelet does.
func (n *Node) expandIfNeeded(ctx context.Context, pv *podVolume) error {
	v := pv.vol
	if v.claim == "" || !pv.published {
		return nil
	}
	ns := v.namespace
	// The cache answers the common case (nothing pending) without an API request.
	if cached, err := n.claims.PersistentVolumeClaims(ns).Get(v.claim); err == nil && !expansionPending(cached) {
		return nil
	}
	lock := n.state.volumeLock(v.unique)
	lock.Lock()
	defer lock.Unlock()
	claim, err := n.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, v.claim, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read claim %s/%s: %w", ns, v.claim, err)
	}
	if !expansionPending(claim) {
		return nil
	}
	pvObj, err := n.client.CoreV1().PersistentVolumes().Get(ctx, v.specName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read persistentvolume %s: %w", v.specName, err)
	}
	size := pvObj.Spec.Capacity[v1.ResourceStorage]
	if n.caps.expand {
		staging := ""
		if s := n.state.stagedVolume(v.unique); s != nil {
			staging = s.path
		}
		callCtx, cancel := context.WithTimeout(ctx, csiTimeout)
		_, err := n.node.NodeExpandVolume(callCtx, &csi.NodeExpandVolumeRequest{
			VolumeId: v.handle, VolumePath: pv.target, StagingTargetPath: staging,
			CapacityRange:    &csi.CapacityRange{RequiredBytes: size.Value()},
			VolumeCapability: v.capability(n.caps.multiWriter, ""),
		})
		cancel()
		if err != nil {
			return fmt.Errorf("NodeExpandVolume %s to %s: %w", v.handle, size.String(), err)
		}
	}
	var conds []v1.PersistentVolumeClaimCondition
	for _, c := range claim.Status.Conditions {
		if c.Type != v1.PersistentVolumeClaimFileSystemResizePending && c.Type != v1.PersistentVolumeClaimResizing {
			conds = append(conds, c)
		}
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": claim.ResourceVersion},
		"status": map[string]any{
			"capacity":                  v1.ResourceList{v1.ResourceStorage: size},
			"conditions":                conds,
			"allocatedResourceStatuses": map[string]any{string(v1.ResourceStorage): nil},
		},
	})
	if err != nil {
		return err
	}
	if _, err := n.client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, v.claim, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("record expansion of claim %s/%s: %w", ns, v.claim, err)
	}
	n.log.V(2).Info("Volume expanded", "claim", ns+"/"+v.claim, "size", size.String())
	return nil
}
