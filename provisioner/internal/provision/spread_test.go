package provision

import (
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
)

// The offsets are upstream's (getPVCNameHashAndIndexOffset: 32-bit FNV-1 of the set's name plus the ordinal,
// modulo the number of segments), computed outside Go for these names; FNV-1a would give other values for all
// but one of them.
func TestSpreadOffset(t *testing.T) {
	tests := []struct {
		name string
		n    int
		want int
	}{
		{"data-web-0", 3, 0},
		{"data-web-1", 3, 1},
		{"data-web-2", 3, 2},
		{"logs-web-1", 3, 1},           // another template of replica 1: the same zone as data-web-1
		{"scratch", 3, 1},              // no ordinal: the whole name is hashed
		{"my-claim-x", 3, 1},           // a suffix that is no number is no ordinal
		{"a-b-4294967295", 5, 4},       // the sum wraps at 32 bits, as upstream's
		{"db-7", 4, 2},                 // "<name>-<ordinal>": the name is hashed
		{"data-web-99999999999", 3, 2}, // an ordinal above 32 bits is no ordinal: the whole name is hashed
	}
	for _, tc := range tests {
		if got := spreadOffset(tc.name, tc.n); got != tc.want {
			t.Errorf("spreadOffset(%q, %d) = %d, want %d", tc.name, tc.n, got, tc.want)
		}
	}
}

// Immediate-binding claims of one StatefulSet go round-robin over the zones the driver runs in, each replica's
// claims of every template in one zone, as upstream places them.
func TestImmediateStatefulSetSpreading(t *testing.T) {
	var objs []runtime.Object
	for _, z := range []string{"c", "a", "b"} {
		n, cn := testutil.Node("n-"+z, map[string]string{"zone": z}, "zone")
		objs = append(objs, n, cn)
	}
	cfg := defaultConfig()
	cfg.Capabilities.Topology = true
	h := newHarness(t, cfg, objs...)
	first := func(claim string) string {
		t.Helper()
		req, err := h.p.accessibility(&storagev1.StorageClass{}, "", claim)
		if err != nil {
			t.Fatal(err)
		}
		if len(req.Requisite) != 3 || len(req.Preferred) != 3 {
			t.Fatalf("claim %s: requisite %v, preferred %v, want 3 each", claim, req.Requisite, req.Preferred)
		}
		return req.Preferred[0].Segments["zone"]
	}
	// Sorted zones a, b, c; the offsets of data-web-0..2 are 0, 1, 2 (TestSpreadOffset).
	for claim, want := range map[string]string{"data-web-0": "a", "data-web-1": "b", "data-web-2": "c", "logs-web-1": "b", "data-web-3": "a"} {
		if got := first(claim); got != want {
			t.Errorf("claim %s prefers zone %s first, want %s", claim, got, want)
		}
	}
}

// Segments are ordered as upstream orders topology terms: fewer keys first, then by key, then by value.
func TestCompareSegments(t *testing.T) {
	tests := []struct {
		a, b segment
		less bool
	}{
		{segment{"zone": "b"}, segment{"rack": "1", "zone": "a"}, true}, // fewer keys first
		{segment{"zone": "a"}, segment{"zone": "b"}, true},
		{segment{"a": "1", "z": "1"}, segment{"a.b": "1", "z": "1"}, true}, // key "a" before "a.b", unlike "a=" vs "a."
		{segment{"zone": "a"}, segment{"zone": "a"}, false},
	}
	for _, tc := range tests {
		if got := compareSegments(tc.a, tc.b) < 0; got != tc.less {
			t.Errorf("compareSegments(%v, %v) < 0 = %t, want %t", tc.a, tc.b, got, tc.less)
		}
	}
}
