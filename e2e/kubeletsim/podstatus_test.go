package kubeletsim

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodPhaseFollowsContainersAndRestartPolicy(t *testing.T) {
	running := v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}, Ready: true}
	creating := v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	exited := func(code int32) v1.ContainerStatus {
		return v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}
	}
	backingOff := v1.ContainerStatus{
		State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}, RestartCount: 1,
	}
	tests := []struct {
		name       string
		policy     v1.RestartPolicy
		containers []v1.ContainerStatus
		want       v1.PodPhase
	}{
		{"no container started yet", v1.RestartPolicyOnFailure, []v1.ContainerStatus{creating}, v1.PodPending},
		{"one of two not started", v1.RestartPolicyAlways, []v1.ContainerStatus{running, creating}, v1.PodPending},
		{"running", v1.RestartPolicyOnFailure, []v1.ContainerStatus{running}, v1.PodRunning},
		{"exit 0 under OnFailure", v1.RestartPolicyOnFailure, []v1.ContainerStatus{exited(0)}, v1.PodSucceeded},
		{"exit 0 under Never", v1.RestartPolicyNever, []v1.ContainerStatus{exited(0)}, v1.PodSucceeded},
		{"exit 0 under Always is restarted", v1.RestartPolicyAlways, []v1.ContainerStatus{exited(0)}, v1.PodRunning},
		{"exit 1 under Never", v1.RestartPolicyNever, []v1.ContainerStatus{exited(1)}, v1.PodFailed},
		{"exit 1 under OnFailure is restarted", v1.RestartPolicyOnFailure, []v1.ContainerStatus{exited(1)}, v1.PodRunning},
		{"waiting for a restart", v1.RestartPolicyOnFailure, []v1.ContainerStatus{backingOff}, v1.PodRunning},
		{"one done, one running", v1.RestartPolicyNever, []v1.ContainerStatus{exited(0), running}, v1.PodRunning},
		{"one failed, one succeeded", v1.RestartPolicyNever, []v1.ContainerStatus{exited(0), exited(2)}, v1.PodFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podPhase(tt.policy, tt.containers); got != tt.want {
				t.Errorf("podPhase(%s) = %s, want %s", tt.policy, got, tt.want)
			}
		})
	}
}

func TestPodConditionsKeepTransitionTimesAndSayWhyNotReady(t *testing.T) {
	before, now := metav1.Unix(100, 0), metav1.Unix(200, 0)
	old := []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: before},
		{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: before},
		{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: before},
	}
	done := []v1.ContainerStatus{{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{}}}}
	got := map[v1.PodConditionType]v1.PodCondition{}
	for _, c := range podConditions(old, v1.PodSucceeded, done, now) {
		got[c.Type] = c
	}
	if c := got[v1.PodScheduled]; c.Status != v1.ConditionTrue || c.LastTransitionTime != before {
		t.Errorf("PodScheduled = %+v, want it kept", c)
	}
	if c := got[v1.PodInitialized]; c.LastTransitionTime != before {
		t.Errorf("Initialized = %+v, want its transition time kept", c)
	}
	if c := got[v1.PodReady]; c.Status != v1.ConditionFalse || c.Reason != "PodCompleted" || c.LastTransitionTime != now {
		t.Errorf("Ready = %+v, want False, PodCompleted, changed now", c)
	}
	if c := got[v1.PodReadyToStartContainers]; c.Status != v1.ConditionFalse {
		t.Errorf("PodReadyToStartContainers = %+v, want False once the Pod is done", c)
	}
}
