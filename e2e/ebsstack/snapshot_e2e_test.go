//go:build e2e

package ebsstack

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestE2EEBSSnapshotRestore runs scenario 4 through Stowage's snapshot-controller and csi-snapshotter (started
// with upstream's manifest args beside the other sidecars): scenario 1 writes data, scenario 4 snapshots it,
// restores it in node C's zone, reads the same bytes and deletes everything, the EBS snapshot included, and
// scenario 5 deletes the rest. Here the sidecars come from Options.With, as in a stack started for snapshots.
func TestE2EEBSSnapshotRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	s := startTestStack(ctx, t, Options{UpstreamArgs: true, With: SnapshotSidecars}, nil)
	runSnapshotLifecycle(ctx, t, s.Stack)
	for _, snap := range s.EC2.State().Snapshots {
		t.Errorf("EC2 still holds snapshot %s (%s) after the run", snap.ID, snap.State)
	}
	s.stopLeavesNothing(t)
}

// runSnapshotLifecycle runs the provision, snapshot-and-restore and delete scenarios on the stack, each a
// subtest, stopping at the first that fails, and logs the steps they took.
func runSnapshotLifecycle(ctx context.Context, t *testing.T, stack *Stack) {
	t.Helper()
	var out strings.Builder
	l, err := NewLifecycle(stack, NewReport(&out))
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []struct {
		name string
		run  func(context.Context) error
	}{{"provision", l.Provision}, {"snapshot and restore", l.SnapshotRestore}, {"delete", l.Delete}} {
		if !t.Run(sc.name, func(t *testing.T) {
			if err := sc.run(ctx); err != nil {
				t.Fatalf("scenario %s: %v", sc.name, err)
			}
		}) {
			break
		}
	}
	t.Logf("steps:%s", out.String())
}
