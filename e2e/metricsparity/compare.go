package metricsparity

import (
	"fmt"
	"maps"
	"slices"
)

// Options tune Compare.
type Options struct {
	// Extra are families the Stowage binary may serve that upstream does not, each with the reason; a test
	// keeps this list short and commented. Missing families are never allowed.
	Extra map[string]string
	// Values are, by family name, the labels whose value sets must be equal too (a queue's name, a leader
	// election's name), where the scenario makes them the same on both sides.
	Values map[string][]string
	// Skip leaves families out of the comparison on both sides: only for series whose presence depends on
	// timing rather than on the code (a counter that one side happened to reach first).
	Skip func(name string) bool
}

// Compare returns the differences between got (Stowage's scrape) and want (upstream's, or its checked-in
// list), one line each, sorted; none means the same shape.
func Compare(got, want Shape, o Options) []string {
	var diffs []string
	skip := func(name string) bool { return o.Skip != nil && o.Skip(name) }
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if skip(name) {
			continue
		}
		w := want[name]
		g, ok := got[name]
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
		for _, label := range o.Values[name] {
			if !slices.Equal(g.Values[label], w.Values[label]) {
				diffs = append(diffs, fmt.Sprintf("%s: %s values %q, upstream %q", name, label, g.Values[label], w.Values[label]))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[name]; ok || skip(name) {
			continue
		}
		if _, ok := o.Extra[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("extra %s (%s, labels %v)", name, got[name].Type, got[name].LabelSets))
		}
	}
	return diffs
}
