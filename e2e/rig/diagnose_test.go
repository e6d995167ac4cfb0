package rig

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func TestPodDiagnosisNamesWhatIsNotReady(t *testing.T) {
	readyCondition := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	ready := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "controller-1", Namespace: "kube-system"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: readyCondition},
	}
	// Ready between two crashes of its registrar.
	crashing := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "node-y", Namespace: "kube-system"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: readyCondition, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "registrar", Ready: true, RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}},
		}},
	}
	broken := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "node-x", Namespace: "kube-system"},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "plugin", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: "needs privileged"}}},
			{Name: "registrar", RestartCount: 3,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}},
			{Name: "probe", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		}},
	}
	objects := []runtime.Object{ready, crashing, broken}
	base := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for i := range 12 {
		objects = append(objects, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("e%d", i), Namespace: "kube-system"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "node-x"},
			Type:           corev1.EventTypeWarning, Reason: fmt.Sprintf("Reason%d", i), Message: "m",
			// Listed out of order: the diagnosis sorts by time and keeps the latest.
			LastTimestamp: metav1.NewTime(base.Add(time.Duration((i*7)%12) * time.Minute)),
		})
	}
	client := fake.NewClientset(objects...)
	got := PodDiagnosis(context.Background(), client, "kube-system")
	for _, want := range []string{
		`Pod kube-system/node-x on "node-a": Pending`,
		"container plugin: waiting: CreateContainerConfigError: needs privileged (restarts 0)",
		"container registrar: waiting: CrashLoopBackOff; last ended Error, exit code 1 (restarts 3)",
		"Pod kube-system/node-y on \"\": Running\n  container registrar: running; last ended Error, exit code 1 (restarts 2)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diagnosis lacks %q:\n%s", want, got)
		}
	}
	for _, absent := range []string{"controller-1", "container probe"} {
		if strings.Contains(got, absent) {
			t.Errorf("diagnosis names the ready %q:\n%s", absent, got)
		}
	}
	if n := strings.Count(got, "Event Warning"); n != diagnosisEvents {
		t.Errorf("diagnosis quotes %d Events, want the latest %d:\n%s", n, diagnosisEvents, got)
	}
	// Event i happened at minute (7i mod 12); the two earliest are minutes 0 and 1: events 0 and 7.
	for _, old := range []string{"Reason0:", "Reason7:"} {
		if strings.Contains(got, old) {
			t.Errorf("diagnosis quotes the old %s:\n%s", old, got)
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(got), "Reason5: m") {
		t.Errorf("the latest Event (Reason5, minute 11) is not last:\n%s", got)
	}
}
