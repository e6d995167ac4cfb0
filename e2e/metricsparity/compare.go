package metricsparity

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Options tune Compare.
type Options struct {
	// Extra are families the Stowage binary may serve that upstream does not, and Absent families of
	// upstream's it need not serve, each with the reason; keys ending in "*" are prefixes. Both lists stay
	// short: every entry is a difference a dashboard could see.
	Extra  map[string]string
	Absent map[string]string
	// Optional are families whose presence depends on timing, not on the code (a failure counter's first
	// increment after a retried conflict): either side may lack them, and where both have them they compare.
	Optional map[string]string
	// ExtraValues and AbsentValues are the same for values of the Values labels, keyed "label=value".
	ExtraValues  map[string]string
	AbsentValues map[string]string
	// Values are labels whose value sets must be equal too, in every family that has them (a queue's or a
	// leader election's name, a CSI method), where the scenario makes them the same on both sides.
	Values []string
}

// Compare returns the differences between got (Stowage's scrape) and want (upstream's, or its checked-in
// list), one line each, sorted; none means the same shape.
func Compare(got, want Shape, o Options) []string {
	var diffs []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		w := want[name]
		g, ok := got[name]
		if !ok && (listed(o.Absent, name) || listed(o.Optional, name)) {
			continue
		}
		if !ok {
			diffs = append(diffs, fmt.Sprintf("missing %s (%s, labels %v)", name, w.Type, w.LabelSets))
			continue
		}
		if g.Type != w.Type {
			diffs = append(diffs, fmt.Sprintf("%s: type %s, upstream %s", name, g.Type, w.Type))
		}
		if !slices.Equal(g.LabelSets, w.LabelSets) {
			diffs = append(diffs, fmt.Sprintf("%s: label names %v, upstream %v", name, g.LabelSets, w.LabelSets))
		}
		if !slices.Equal(g.Buckets, w.Buckets) {
			diffs = append(diffs, fmt.Sprintf("%s: buckets %v, upstream %v", name, g.Buckets, w.Buckets))
		}
		for _, label := range o.Values {
			if _, ok := w.Values[label]; ok {
				diffs = append(diffs, compareValues(name, label, g.Values[label], w.Values[label], o)...)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[name]; ok {
			continue
		}
		if !listed(o.Extra, name) && !listed(o.Optional, name) {
			diffs = append(diffs, fmt.Sprintf("extra %s (%s, labels %v)", name, got[name].Type, got[name].LabelSets))
		}
	}
	return diffs
}

// compareValues reports the values of label that one side has and the other lacks, less the allowed ones.
func compareValues(family, label string, got, want []string, o Options) []string {
	var missing, extra []string
	for _, v := range want {
		if !slices.Contains(got, v) && !listed(o.AbsentValues, label+"="+v) {
			missing = append(missing, v)
		}
	}
	for _, v := range got {
		if !slices.Contains(want, v) && !listed(o.ExtraValues, label+"="+v) {
			extra = append(extra, v)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s: %s values %q, upstream %q (missing %q, extra %q)", family, label, got, want, missing, extra)}
}

// listed reports whether name is a key of list, or starts with a key ending in "*".
func listed(list map[string]string, name string) bool {
	for k := range list {
		if k == name || (strings.HasSuffix(k, "*") && strings.HasPrefix(name, strings.TrimSuffix(k, "*"))) {
			return true
		}
	}
	return false
}

// Sidecar is the comparison of a Stowage sidecar with its upstream peer: names, label names and buckets of
// every family, the values of the labels the same scenario makes equal, and these differences only.
func Sidecar() Options {
	return Options{
		Values: []string{"name", "method_name", "grpc_status_code", "migrated"},
		Extra: map[string]string{
			// Stowage's own: the client's configured QPS and burst, for alerts on throttling.
			"stowage_kube_client_rate_limit_qps": "Stowage's client rate limit, reported for throttling alerts",
			// Upstream's series appears at the first slow-path renewal; Stowage's is 0 from the start, so
			// increase() and rate() work from the first scrape.
			"leader_election_slowpath_total": "served at 0 before the first slow path",
		},
		Absent: map[string]string{
			// Registered in upstream's global registry as a side effect of importing k8s.io/apiserver
			// packages; they describe an API server, which a sidecar is not, and stay at 0.
			"apiserver_*":            "an API server's metrics, registered by an import, always 0",
			"aggregator_discovery_*": "an API server's metrics, registered by an import, always 0",
		},
	}
}
