package provision

import (
	"maps"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// FuzzTopologySegments takes a StorageClass's allowedTopologies, whose values the API server does not hold to
// label syntax: no panic; flattening gives each combination of one value per key exactly once, none lost
// and none twice, which needs the segments' canonical spelling to tell different segments apart.
func FuzzTopologySegments(f *testing.F) {
	f.Add("topology.kubernetes.io/zone", "us-east-1a,us-east-1b", "topology.ebs.csi.aws.com/zone", "us-east-1a")
	f.Add("zone", "a", "zone", "b")
	f.Add("a", "b|b,c=d", "c", "d")
	f.Add("a", "x", "a=x,b", "y")
	f.Fuzz(func(t *testing.T, k1, values1, k2, values2 string) {
		split := func(s string) []string { return strings.Split(s, "|") }
		terms := []v1.TopologySelectorTerm{
			{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: k1, Values: split(values1)}, {Key: k2, Values: split(values2)}}},
			{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: k1, Values: split(values1)}}},
		}
		got := flattenAllowed(terms)
		var want []segment
		add := func(s segment) {
			for _, w := range want {
				if maps.Equal(w, s) {
					return
				}
			}
			want = append(want, s)
		}
		for _, a := range split(values1) {
			for _, b := range split(values2) {
				s := segment{k1: a}
				s[k2] = b
				add(s)
			}
		}
		for _, a := range split(values1) {
			add(segment{k1: a})
		}
		if len(got) != len(want) {
			t.Fatalf("flattenAllowed(%v) = %v, want the %d distinct segments %v", terms, got, len(want), want)
		}
		for i := range got {
			for j := range got {
				if i != j && maps.Equal(got[i], got[j]) {
					t.Fatalf("flattenAllowed(%v) = %v: %v twice", terms, got, got[i])
				}
			}
		}
	})
}
