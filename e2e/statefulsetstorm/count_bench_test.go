//go:build bench

package statefulsetstorm_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// ec2Calls reads ec2sim's request counter from its /metrics and sums it by action over every result code, so
// refused and throttled calls count too: each is a call the driver made.
func ec2Calls(ctx context.Context, ec2URL string) (map[string]int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ec2URL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ec2sim metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("ec2sim metrics: %s", resp.Status)
	}
	out := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		labels, value, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "ec2sim_requests_total{"), "} ")
		if !ok || labels == sc.Text() {
			continue
		}
		action := labelValue(labels, "action")
		n, err := strconv.ParseFloat(value, 64)
		if action == "" || err != nil {
			return nil, fmt.Errorf("ec2sim metrics line %q: no action or count", sc.Text())
		}
		out[action] += int(n)
	}
	return out, sc.Err()
}

// labelValue is the value of name in a Prometheus label set `a="x",b="y"`.
func labelValue(labels, name string) string {
	for _, l := range strings.Split(labels, ",") {
		if k, v, ok := strings.Cut(l, "="); ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// diffCalls is after - before, by action, leaving out actions not called in between.
func diffCalls(after, before map[string]int) map[string]int {
	out := map[string]int{}
	for a, n := range after {
		if d := n - before[a]; d > 0 {
			out[a] = d
		}
	}
	return out
}

// writesByComponent counts the writes by the program that made them (see component).
func writesByComponent(writes []rig.AuditWrite) map[string]int {
	out := map[string]int{}
	for _, w := range writes {
		out[component(w)]++
	}
	return out
}

// component names who made a write: the kubelets, the scheduler, each of kube-controller-manager's controllers
// (each under its own ServiceAccount), and otherwise the program its user agent names, which tells apart the
// sidecars of the driver's controller Pod, who all write under its one ServiceAccount.
func component(w rig.AuditWrite) string {
	const kubeSystemSA = "system:serviceaccount:kube-system:"
	prog, _, _ := strings.Cut(w.UserAgent, "/")
	switch {
	case strings.HasPrefix(w.User, "system:node:"):
		return "kubelet"
	case w.User == "system:kube-scheduler":
		return "kube-scheduler"
	case prog == "kube-controller-manager" && strings.HasPrefix(w.User, kubeSystemSA):
		return "kcm " + strings.TrimPrefix(w.User, kubeSystemSA)
	case prog == "":
		return w.User
	}
	return prog
}

// schedulerTime is the scheduler's part in pod's start, from the audit log: from the Pod's create to the
// scheduler choosing its node for the claim (the selected-node annotation WaitForFirstConsumer waits for),
// plus from the claim's last status write before the Pod's binding (Bound) to the binding. Zero when the log
// lacks one of them.
func schedulerTime(writes []rig.AuditWrite, pod string) time.Duration {
	claim := claimName + "-" + pod
	var created, selected, bound, binding time.Time
	for _, w := range writes {
		switch {
		case w.Resource == "pods" && w.Verb == "create" && w.Name == pod && created.IsZero():
			created = w.Time
		case w.Resource == "persistentvolumeclaims" && w.Name == claim && w.User == "system:kube-scheduler" && selected.IsZero():
			selected = w.Time
		case w.Resource == "persistentvolumeclaims/status" && w.Name == claim && binding.IsZero():
			bound = w.Time
		case w.Resource == "pods/binding" && w.Name == pod && binding.IsZero():
			binding = w.Time
		}
	}
	if created.IsZero() || selected.IsZero() || bound.IsZero() || binding.IsZero() {
		return 0
	}
	return selected.Sub(created) + binding.Sub(bound)
}
