package s3install

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// lastEvents is how many of the namespace's Events a diagnosis shows: the newest say why a Pod is stuck.
const lastEvents = 15

// diagnose says why an install is not ready: each Pod of selector in namespace that is not Ready with its
// containers' states, and the namespace's last Events. Errors reading them become lines of their own.
func diagnose(ctx context.Context, client kubernetes.Interface, namespace, selector string) string {
	var b strings.Builder
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		fmt.Fprintf(&b, "list Pods: %v\n", err)
	} else {
		b.WriteString("Pods not Ready:")
		none := true
		for _, p := range pods.Items {
			if podReady(&p) {
				continue
			}
			none = false
			fmt.Fprintf(&b, "\n  %s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
			for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				fmt.Fprintf(&b, "\n    %s: %s, ready %v, %d restarts", cs.Name, containerState(cs.State), cs.Ready, cs.RestartCount)
			}
		}
		if none {
			b.WriteString(" none")
		}
		b.WriteString("\n")
	}
	events, err := client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "list Events: %v\n", err)
		return b.String()
	}
	items := events.Items
	slices.SortStableFunc(items, func(x, y corev1.Event) int { return eventTime(x).Compare(eventTime(y)) })
	if len(items) > lastEvents {
		items = items[len(items)-lastEvents:]
	}
	fmt.Fprintf(&b, "last Events in %s:", namespace)
	for _, e := range items {
		fmt.Fprintf(&b, "\n  %s %s %s %s/%s: %s", eventTime(e).UTC().Format(time.TimeOnly), e.Type, e.Reason,
			e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
	}
	if len(items) == 0 {
		b.WriteString(" none")
	}
	return b.String()
}

func podReady(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return strings.TrimSuffix(fmt.Sprintf("waiting (%s) %s", s.Waiting.Reason, s.Waiting.Message), " ")
	case s.Terminated != nil:
		return strings.TrimSuffix(fmt.Sprintf("terminated (%s, exit code %d) %s", s.Terminated.Reason, s.Terminated.ExitCode, s.Terminated.Message), " ")
	case s.Running != nil:
		return "running"
	}
	return "not started"
}

// eventTime is when the Event last happened: events.k8s.io writers set only EventTime, core ones the
// timestamps.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
