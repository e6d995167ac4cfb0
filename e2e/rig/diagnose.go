package rig

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// diagnosisEvents is how many of a namespace's latest Warning Events a diagnosis quotes.
const diagnosisEvents = 10

// PodDiagnosis says why an install in namespace is not ready, for an error message: each Pod that is not
// Ready or has a restarted container, with the state of each such container (waiting, running or terminated,
// with reason, message, last exit and restarts), then the namespace's latest Warning Events. A failed `helm install --wait` only
// says it timed out; this says what the kubelet said.
func PodDiagnosis(ctx context.Context, client kubernetes.Interface, namespace string) string {
	var b strings.Builder
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "list Pods in %s: %v\n", namespace, err)
	} else {
		for _, p := range pods.Items {
			statuses := append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...)
			// A container that keeps failing is running, and its Pod Ready, between two crashes.
			troubled := func(c corev1.ContainerStatus) bool { return !c.Ready || c.RestartCount > 0 }
			if podReady(&p) && !slices.ContainsFunc(statuses, troubled) {
				continue
			}
			fmt.Fprintf(&b, "Pod %s/%s on %q: %s\n", namespace, p.Name, p.Spec.NodeName, p.Status.Phase)
			for _, c := range statuses {
				if troubled(c) {
					fmt.Fprintf(&b, "  container %s: %s (restarts %d)\n", c.Name, containerState(c), c.RestartCount)
				}
			}
		}
	}
	events, err := client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		fmt.Fprintf(&b, "list Events in %s: %v\n", namespace, err)
		return b.String()
	}
	// The rig runs no cluster DNS: every Pod gets this warning, which would crowd out the ones that explain.
	items := slices.DeleteFunc(events.Items, func(e corev1.Event) bool { return e.Reason == "MissingClusterDNS" })
	slices.SortFunc(items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b).Time) })
	if len(items) > diagnosisEvents {
		items = items[len(items)-diagnosisEvents:]
	}
	for _, e := range items {
		fmt.Fprintf(&b, "Event %s %s/%s: %s: %s\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	return b.String()
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func containerState(c corev1.ContainerStatus) string {
	switch {
	case c.State.Waiting != nil:
		s := "waiting: " + c.State.Waiting.Reason
		if c.State.Waiting.Message != "" {
			s += ": " + c.State.Waiting.Message
		}
		if t := c.LastTerminationState.Terminated; t != nil {
			s += fmt.Sprintf("; last ended %s, exit code %d", t.Reason, t.ExitCode)
		}
		return s
	case c.State.Terminated != nil:
		t := c.State.Terminated
		return fmt.Sprintf("terminated: %s, exit code %d %s", t.Reason, t.ExitCode, t.Message)
	case c.State.Running != nil:
		s := "running"
		if !c.Ready {
			s += ", not ready"
		}
		if t := c.LastTerminationState.Terminated; t != nil {
			s += fmt.Sprintf("; last ended %s, exit code %d", t.Reason, t.ExitCode)
		}
		return s
	}
	return "no state yet"
}

// eventTime is when an Event last happened: series and legacy Events fill different fields.
func eventTime(e corev1.Event) metav1.Time {
	for _, t := range []metav1.Time{e.LastTimestamp, {Time: e.EventTime.Time}, e.CreationTimestamp} {
		if !t.IsZero() {
			return t
		}
	}
	return metav1.Time{}
}
