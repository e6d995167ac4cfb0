package ebsdriver

import (
	"fmt"
	"slices"
	"testing"
)

// pinnedSkip is a csi-sanity spec expected to skip against this driver, and why.
type pinnedSkip struct {
	spec, reason string
}

// skipMismatches compares the full texts of the specs csi-sanity skipped with the pinned skips. It returns
// a line for each skipped spec that is not pinned (a new skip, which would otherwise pass silently) and for
// each pinned spec that did not skip (a stale pin: the spec now runs, or csi-sanity no longer has it),
// sorted; none when the two agree.
func skipMismatches(pinned []pinnedSkip, skipped []string) []string {
	var out []string
	for _, s := range skipped {
		if !slices.ContainsFunc(pinned, func(p pinnedSkip) bool { return p.spec == s }) {
			out = append(out, fmt.Sprintf("new skip %q: make it run, or pin it with the reason it skips", s))
		}
	}
	for _, p := range pinned {
		if !slices.Contains(skipped, p.spec) {
			out = append(out, fmt.Sprintf("stale pin %q (%s): it did not skip; remove it from the pinned skips", p.spec, p.reason))
		}
	}
	slices.Sort(out)
	return out
}

func TestSkipMismatchesNamesNewSkipsAndStalePins(t *testing.T) {
	pinned := []pinnedSkip{{"Controller ListVolumes", "not advertised"}, {"Node GetStorageHealth", "not advertised"}}
	tests := []struct {
		name    string
		skipped []string
		want    []string
	}{
		{name: "the pins are exactly the skips", skipped: []string{"Node GetStorageHealth", "Controller ListVolumes"}},
		{name: "a new skip fails", skipped: []string{"Controller ListVolumes", "Node GetStorageHealth", "Node NodeExpandVolume"},
			want: []string{`new skip "Node NodeExpandVolume": make it run, or pin it with the reason it skips`}},
		{name: "a pinned spec that ran fails", skipped: []string{"Controller ListVolumes"},
			want: []string{`stale pin "Node GetStorageHealth" (not advertised): it did not skip; remove it from the pinned skips`}},
		{name: "both at once", skipped: []string{"Node GetStorageHealth", "Controller GetCapacity"},
			want: []string{
				`new skip "Controller GetCapacity": make it run, or pin it with the reason it skips`,
				`stale pin "Controller ListVolumes" (not advertised): it did not skip; remove it from the pinned skips`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := skipMismatches(pinned, tt.skipped); !slices.Equal(got, tt.want) {
				t.Errorf("skipMismatches = %q, want %q", got, tt.want)
			}
		})
	}
}
