package demo

import (
	"context"

	"github.com/stowage-csi/stowage/e2e/ebsstack"
)

// step is one step of a scenario: its name in the report, and what it does, which returns what the report
// says of it.
type step struct {
	name string
	do   func(ctx context.Context) (string, error)
}

// runSteps takes the steps in order, each in the report, and stops at the first that fails: the later ones
// build on it.
func runSteps(ctx context.Context, report *ebsstack.Report, steps []step) error {
	for _, st := range steps {
		if err := report.Step(ctx, st.name, st.do); err != nil {
			return err
		}
	}
	return nil
}
