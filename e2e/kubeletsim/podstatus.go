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

// podPhase is the phase the kubelet derives from its containers' states (kubelet_pods.go getPhase): Pending
// while one has never run, Running while one runs or will be restarted, else Succeeded if all exited 0 and
// Failed if one did not (a Pod with restartPolicy Always is never done).
func podPhase(policy v1.RestartPolicy, statuses []v1.ContainerStatus) v1.PodPhase {
	var running, waiting, stopped, succeeded int
	for _, s := range statuses {
		switch {
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case s.LastTerminationState.Terminated != nil:
			stopped++ // waiting to be restarted
		default:
			waiting++
		}
	}
	switch {
	case waiting > 0:
		return v1.PodPending
	case running > 0:
		return v1.PodRunning
	case stopped == 0:
		return v1.PodPending
	case policy == v1.RestartPolicyAlways:
		return v1.PodRunning
	case stopped == succeeded:
		return v1.PodSucceeded
	case policy == v1.RestartPolicyNever:
		return v1.PodFailed
	default:
		// OnFailure: a failed container is restarted.
		return v1.PodRunning
	}
}

// podConditions are the kubelet's Pod conditions for the phase and container states; they keep the
// transition time of a condition whose status did not change.
func podConditions(old []v1.PodCondition, phase v1.PodPhase, statuses []v1.ContainerStatus, now metav1.Time) []v1.PodCondition {
	ready := len(statuses) > 0
	for _, s := range statuses {
		ready = ready && s.Ready
	}
	sandbox := phase == v1.PodPending || phase == v1.PodRunning
	readyReason := ""
	if !ready {
		readyReason = "ContainersNotReady"
		if phase == v1.PodSucceeded || phase == v1.PodFailed {
			readyReason = "PodCompleted"
		}
	}
	want := []v1.PodCondition{
		{Type: v1.PodReadyToStartContainers, Status: conditionStatus(sandbox)},
		{Type: v1.PodInitialized, Status: v1.ConditionTrue},
		{Type: v1.ContainersReady, Status: conditionStatus(ready), Reason: readyReason},
		{Type: v1.PodReady, Status: conditionStatus(ready), Reason: readyReason},
	}
	var out []v1.PodCondition
	for _, c := range old {
		if !slices.Contains(readyConditions, c.Type) {
			out = append(out, c)
		}
	}
	for _, c := range want {
		c.LastTransitionTime = now
		for _, o := range old {
			if o.Type == c.Type && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		out = append(out, c)
	}
	return out
}

func conditionStatus(b bool) v1.ConditionStatus {
	if b {
		return v1.ConditionTrue
	}
	return v1.ConditionFalse
}

// reportContainers writes the status of a Pod whose containers run here, when it changed since the last
// write. It returns the phase written.
func (n *Node) reportContainers(ctx context.Context, pod *v1.Pod, r *podRun) (v1.PodPhase, error) {
	statuses := make([]v1.ContainerStatus, 0, len(r.containers))
	for _, c := range r.containers {
		statuses = append(statuses, c.snapshot())
	}
	phase := podPhase(pod.Spec.RestartPolicy, statuses)
	startTime := metav1.NewTime(time.Now().Truncate(time.Second))
	if pod.Status.StartTime != nil {
		startTime = *pod.Status.StartTime
	}
	status := map[string]any{
		"phase": phase, "conditions": podConditions(pod.Status.Conditions, phase, statuses, metav1.NewTime(time.Now().Truncate(time.Second))),
		"containerStatuses": statuses, "startTime": startTime,
		"hostIP": "127.0.0.1", "hostIPs": []v1.HostIP{{IP: "127.0.0.1"}},
	}
	// What decides a write is the state without transition times, so an unchanged Pod is written once.
	key, err := json.Marshal([]any{phase, statuses})
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	same := r.written == string(key)
	r.mu.Unlock()
	if same {
		return phase, nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID}, // fails the patch if the Pod was replaced meanwhile
		"status":   status,
	})
	if err != nil {
		return "", err
	}
	if _, err := n.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return "", fmt.Errorf("write status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	r.mu.Lock()
	r.written = string(key)
	r.mu.Unlock()
	n.log.V(2).Info("Pod status", "pod", pod.Namespace+"/"+pod.Name, "phase", phase)
	return phase, nil
}
