package provision

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
)

func TestAccessibility(t *testing.T) {
	n1, cn1 := testutil.Node("n1", map[string]string{"zone": "a"}, "zone")
	n2, cn2 := testutil.Node("n2", map[string]string{"zone": "b"}, "zone")
	n3, cn3 := testutil.Node("n3", map[string]string{"zone": "b"}, "zone")
	n4, cn4 := testutil.Node("n4", map[string]string{"zone": "c", "rack": "1"}, "zone", "rack")
	nodes := []runtime.Object{n1, cn1, n2, cn2, n3, cn3, n4, cn4}
	zones := func(z ...string) []v1.TopologySelectorTerm {
		return []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: "zone", Values: z}}}}
	}
	allowed := []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{
		{Key: "zone", Values: []string{"x", "y"}}, {Key: "rack", Values: []string{"1"}},
	}}}
	tests := []struct {
		name          string
		cfg           func(*Config)
		allowed       []v1.TopologySelectorTerm
		selected      string
		wantNil       bool
		wantRequisite int
		wantFirst     string
		wantErr       bool
	}{
		{name: "no topology capability", cfg: func(c *Config) { c.Capabilities.Topology = false }, wantNil: true},
		{name: "immediate: every zone the driver runs in, once", wantRequisite: 2},
		{name: "immediate without immediate-topology", cfg: func(c *Config) { c.ImmediateTopology = false }, wantNil: true},
		{name: "immediate without immediate-topology, allowedTopologies used", cfg: func(c *Config) { c.ImmediateTopology = false }, allowed: allowed, wantRequisite: 2},
		{name: "selected node first", selected: "n1", wantRequisite: 2, wantFirst: "a"},
		{name: "selected node, strict", cfg: func(c *Config) { c.StrictTopology = true }, selected: "n2", wantRequisite: 1, wantFirst: "b"},
		{name: "selected node without CSINode", selected: "n9", wantErr: true},
		// allowedTopologies bound a selected node as upstream: never a requisite segment outside them.
		{name: "selected node outside allowedTopologies", allowed: zones("a"), selected: "n2", wantErr: true},
		{name: "selected node outside allowedTopologies, strict", cfg: func(c *Config) { c.StrictTopology = true }, allowed: zones("a"), selected: "n2", wantErr: true},
		{name: "selected node inside allowedTopologies, strict", cfg: func(c *Config) { c.StrictTopology = true }, allowed: zones("a", "b"), selected: "n2", wantRequisite: 1, wantFirst: "b"},
		// The node has more topology keys than the class names: the allowed segment it lies in comes first.
		{name: "selected node in a coarser allowed segment", allowed: zones("a", "c"), selected: "n4", wantRequisite: 2, wantFirst: "c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.Capabilities.Topology = true
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			h := newHarness(t, cfg, nodes...)
			class := &storagev1.StorageClass{AllowedTopologies: tc.allowed}
			got, err := h.p.accessibility(class, tc.selected, "claim")
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if tc.wantErr {
				return
			}
			if (got == nil) != tc.wantNil {
				t.Fatalf("got %v, want nil %v", got, tc.wantNil)
			}
			if got == nil {
				return
			}
			if len(got.Requisite) != tc.wantRequisite || len(got.Preferred) != tc.wantRequisite {
				t.Errorf("requisite %v preferred %v, want %d", got.Requisite, got.Preferred, tc.wantRequisite)
			}
			if tc.wantFirst != "" && got.Preferred[0].Segments["zone"] != tc.wantFirst {
				t.Errorf("preferred starts with %v, want zone %s", got.Preferred[0], tc.wantFirst)
			}
		})
	}
}

func TestFlattenAllowed(t *testing.T) {
	got := flattenAllowed([]v1.TopologySelectorTerm{
		{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: "zone", Values: []string{"a", "b"}}, {Key: "rack", Values: []string{"1", "2"}}}},
		{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: "zone", Values: []string{"a"}}, {Key: "rack", Values: []string{"1"}}}},
	})
	if len(got) != 4 {
		t.Errorf("got %d segments %v, want 4 distinct", len(got), got)
	}
}
