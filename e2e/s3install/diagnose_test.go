package s3install

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

func pod(name string, labels map[string]string, ready bool, statuses ...corev1.ContainerStatus) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: statuses,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func event(name, reason string, at time.Time) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "s3-csi-node-x"},
		Type:           corev1.EventTypeWarning, Reason: reason, Message: reason + " message",
		LastTimestamp: metav1.NewTime(at),
	}
}

func TestDiagnoseNamesPodsNotReadyWithTheirContainersAndTheLastEvents(t *testing.T) {
	node := map[string]string{"app": "s3-csi-node"}
	base := time.Date(2026, 12, 7, 21, 0, 0, 0, time.UTC)
	objects := []runtime.Object{
		pod("s3-csi-node-x", node, false,
			corev1.ContainerStatus{Name: "s3-plugin", RestartCount: 3, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s"}}},
			corev1.ContainerStatus{Name: "node-driver-registrar", State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 2}}},
			corev1.ContainerStatus{Name: "liveness-probe", Ready: true, State: corev1.ContainerState{
				Running: &corev1.ContainerStateRunning{}}},
		),
		pod("s3-csi-node-ready", node, true),
		pod("other-not-ready", map[string]string{"app": "other"}, false),
	}
	// More Events than a diagnosis shows, created out of order: the newest are shown, oldest first.
	for i := lastEvents + 4; i >= 0; i-- {
		objects = append(objects, event(fmt.Sprintf("e%02d", i), fmt.Sprintf("Reason%02d", i), base.Add(time.Duration(i)*time.Second)))
	}
	got := diagnose(context.Background(), fake.NewClientset(objects...), Namespace, podSelector)

	for _, want := range []string{
		`s3-csi-node-x on "node-a": Pending`,
		"s3-plugin: waiting (CrashLoopBackOff) back-off 40s, ready false, 3 restarts",
		"node-driver-registrar: terminated (Error, exit code 2), ready false, 0 restarts",
		"liveness-probe: running, ready true, 0 restarts",
		"21:00:19 Warning Reason19 Pod/s3-csi-node-x: Reason19 message",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diagnosis lacks %q:\n%s", want, got)
		}
	}
	for _, absent := range []string{"s3-csi-node-ready", "other-not-ready", "Reason04 "} {
		if strings.Contains(got, absent) {
			t.Errorf("diagnosis has %q:\n%s", absent, got)
		}
	}
	first, last := strings.Index(got, "Reason05 "), strings.Index(got, "Reason19 ")
	if first < 0 || last < first {
		t.Errorf("diagnosis does not show Reason05 to Reason19 oldest first:\n%s", got)
	}
	if n := strings.Count(got, "Warning Reason"); n != lastEvents {
		t.Errorf("diagnosis shows %d Events, want %d:\n%s", n, lastEvents, got)
	}
}

func TestDiagnoseSaysNoneWhenAllIsReadyAndQuiet(t *testing.T) {
	got := diagnose(context.Background(), fake.NewClientset(pod("s3-csi-controller-1", map[string]string{"app": "s3-csi-controller"}, true)),
		Namespace, podSelector)
	want := "Pods not Ready: none\nlast Events in " + Namespace + ": none"
	if got != want {
		t.Errorf("diagnosis = %q, want %q", got, want)
	}
}
