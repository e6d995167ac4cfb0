package ebsstack

import (
	"context"
	"strings"
	"testing"
)

// Scenario is one of the Lifecycle's scenarios under the name a test gives its subtest.
type Scenario struct {
	Name string
	Run  func(context.Context) error
}

// TestScenarios are the scenarios the e2e tests walk, in order: the demo's and the bad parameter. move takes
// Move's place, so that a platform that can hold a node plugin's pre-stop hook runs Move inside it.
func (l *Lifecycle) TestScenarios(move Scenario) []Scenario {
	return []Scenario{
		{"provision", l.Provision},
		move,
		{"xfs and block", l.FilesystemsAndBlock},
		{"snapshot and restore", l.SnapshotRestore},
		{"delete", l.Delete},
		{"bad parameter", l.BadParameter},
		{"generic ephemeral volumes", l.EphemeralVolumes},
		{"expand and modify", l.ExpandModify},
	}
}

// RunScenarios runs each scenario as a subtest of t, in order, and stops at the first that fails: scenarios
// 1 to 5 build on each other. Then it logs the steps out holds (the Lifecycle's report) and r's summary.
func RunScenarios(t *testing.T, ctx context.Context, scenarios []Scenario, r *Report, out *strings.Builder) {
	for _, sc := range scenarios {
		passed := t.Run(sc.Name, func(t *testing.T) {
			if err := sc.Run(ctx); err != nil {
				t.Fatalf("scenario %s: %v", sc.Name, err)
			}
		})
		if !passed {
			break
		}
	}
	var summary strings.Builder
	r.Summary(&summary)
	t.Logf("steps:%s\n%s", out.String(), summary.String())
}
