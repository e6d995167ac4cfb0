//go:build bench

package statefulsetstorm_test

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// writeTable prints the columns side by side with the floor beside them: times, then EC2 calls by action,
// then API writes by component.
func writeTable(w io.Writer, n int, rs []result, f floor) {
	fmt.Fprintf(w, "\nStatefulSet storm: %d replicas (parallel), one 1 GiB gp3 WaitForFirstConsumer claim each, 2 real nodes in 2 zones (%s), ec2sim at EC2's delays\n", n, instanceType)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, cells ...string) {
		fmt.Fprintf(tw, "%s\t%s\t\n", label, strings.Join(cells, "\t"))
	}
	head := []string{}
	for _, r := range rs {
		head = append(head, r.column)
	}
	row("", append(head, "floor")...)
	times := func(label string, get func(result) time.Duration, fl string) {
		var cells []string
		for _, r := range rs {
			cells = append(cells, secs(get(r)))
		}
		row(label, append(cells, fl)...)
	}
	times("apply to all Running", func(r result) time.Duration { return r.running }, secs(f.running))
	times("Pod Running p50", func(r result) time.Duration { return quantile(r.perPod, 0.50) }, "")
	times("Pod Running p99", func(r result) time.Duration { return quantile(r.perPod, 0.99) }, "")
	times("scale 0 + delete claims to no volume", func(r result) time.Duration { return r.deleted }, secs(f.deleted))
	ratio := func(label string, get func(result) time.Duration, fl time.Duration) {
		var cells []string
		for _, r := range rs {
			cells = append(cells, fmt.Sprintf("%.1fx", get(r).Seconds()/fl.Seconds()))
		}
		row(label, append(cells, "")...)
	}
	ratio("all Running / floor", func(r result) time.Duration { return r.running }, f.running)
	ratio("no volume / floor", func(r result) time.Duration { return r.deleted }, f.deleted)
	times("scheduler, slowest Pod", func(r result) time.Duration { return r.sched }, "")
	var spread []string
	for _, r := range rs {
		var parts []string
		for _, node := range slices.Sorted(maps.Keys(r.podsPerNode)) {
			parts = append(parts, fmt.Sprint(r.podsPerNode[node]))
		}
		spread = append(spread, strings.Join(parts, "/"))
	}
	row("Pods per node", append(spread, "")...)
	counts(row, "EC2 calls", rs, func(r result) map[string]int { return r.ec2Calls })
	counts(row, "API writes", rs, func(r result) map[string]int { return r.writes })
	tw.Flush()
	fmt.Fprintf(w, "floor: EC2's longest create (%s) and attach (%s) + mkfs.ext4 of 1 GiB here (%s) + the scheduler's part for the slowest Pod of the first column (%s); deletion: EC2's longest detach (%s)\n",
		secs(createMax), secs(attachMax), secs(f.mkfs), secs(f.sched), secs(detachMax))
}

// counts prints a total row and one row per key of any column, in name order.
func counts(row func(string, ...string), what string, rs []result, get func(result) map[string]int) {
	keys := map[string]bool{}
	var totals []string
	for _, r := range rs {
		sum := 0
		for k, v := range get(r) {
			keys[k] = true
			sum += v
		}
		totals = append(totals, fmt.Sprint(sum))
	}
	row(what, append(totals, "")...)
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		var cells []string
		for _, r := range rs {
			cells = append(cells, fmt.Sprint(get(r)[k]))
		}
		row("  "+k, append(cells, "")...)
	}
}

// quantile is the q-quantile of sorted by the nearest-rank method.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }
