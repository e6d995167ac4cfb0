package kubeletsim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// reportInUse writes node.status.volumesInUse when the set changed. The attach-detach controller does not
// detach a volume while it is listed, and the kubelet does not mount one before it is listed.
func (n *Node) reportInUse(ctx context.Context) error {
	n.reportMu.Lock()
	defer n.reportMu.Unlock()
	want := n.state.inUse()
	if n.reported != nil && slices.Equal(want, n.reported) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"volumesInUse": want}})
	if err != nil {
		return err
	}
	if _, err := n.client.CoreV1().Nodes().Patch(ctx, n.cfg.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("report volumesInUse: %w", err)
	}
	n.reported = want
	return nil
}

// readyConditions are the Pod conditions the kubelet sets once every container runs.
var readyConditions = []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady}

// markRunning sets the Pod Running with every container started and ready, in one status patch.
func (n *Node) markRunning(ctx context.Context, pod *v1.Pod) error {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	var conds []v1.PodCondition
	for _, c := range pod.Status.Conditions {
		if !slices.Contains(readyConditions, c.Type) {
			conds = append(conds, c)
		}
	}
	for _, t := range readyConditions {
		conds = append(conds, v1.PodCondition{Type: t, Status: v1.ConditionTrue, LastTransitionTime: now})
	}
	containers := make([]v1.ContainerStatus, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		containers = append(containers, v1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, ContainerID: "kubeletsim://" + string(pod.UID) + "/" + c.Name,
			Ready: true, Started: ptrTo(true), State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
		})
	}
	status := map[string]any{
		"phase": v1.PodRunning, "conditions": conds, "containerStatuses": containers, "startTime": now,
		"hostIP": "127.0.0.1", "hostIPs": []v1.HostIP{{IP: "127.0.0.1"}},
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID}, // fails the patch if the Pod was replaced meanwhile
		"status":   status,
	})
	if err != nil {
		return err
	}
	_, err = n.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("set pod %s/%s running: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }
