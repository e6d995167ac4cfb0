//go:build e2e

package ebsstack

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/tools"
)

// TestE2EEBSSnapshotCrossRun runs scenario 4 on the EBS stack with one half of the snapshot pair from
// upstream (external-snapshotter v8.7.0, built in e2e/tools) and the other half Stowage's, in both
// combinations: the stack starts Stowage's two (Options.With) with upstream's manifest args, the one under test
// is stopped with SIGTERM (which releases its Lease) and upstream's binary takes its place with the same args,
// ServiceAccount and RBAC. Scenario 1 writes data, scenario 4 snapshots it, restores it in node C's zone and
// reads the same bytes, then deletes the restore and the VolumeSnapshot (policy Delete); scenario 5 deletes the
// rest. ec2sim must hold no snapshot and no volume afterwards, and upstream's process must still be running.
func TestE2EEBSSnapshotCrossRun(t *testing.T) {
	for _, upstream := range SnapshotSidecars {
		t.Run("upstream "+upstream, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			bin, err := tools.Binary(ctx, tools.ExternalSnapshotter(), upstream)
			if err != nil {
				t.Fatal(err)
			}
			s := startTestStack(ctx, t, Options{UpstreamArgs: true, With: SnapshotSidecars}, nil)
			up := s.replaceWithUpstream(ctx, t, upstream, bin)
			runSnapshotLifecycle(ctx, t, s.Stack)
			if done, err := up.Exited(); done {
				t.Errorf("upstream %s exited during the run: %v", upstream, err)
			}
			st := s.EC2.State()
			for _, snap := range st.Snapshots {
				t.Errorf("EC2 still holds snapshot %s (%s) after the run", snap.ID, snap.State)
			}
			for _, v := range st.Volumes {
				t.Errorf("EC2 still holds volume %s (%s) after the run", v.ID, v.State)
			}
			s.stopLeavesNothing(t)
		})
	}
}

// replaceWithUpstream stops the stack's Stowage sidecar name with SIGTERM, waits until it has ended, and starts
// bin (upstream's binary of the same name) with the args the stack gave Stowage's, under the same
// ServiceAccount; the process joins the stack, so Stop ends it.
func (ts *testStack) replaceWithUpstream(ctx context.Context, t *testing.T, name, bin string) *Process {
	t.Helper()
	p := ts.Sidecar(name)
	if p == nil {
		t.Fatalf("the stack runs no %s", name)
	}
	p.Signal(syscall.SIGTERM)
	if err := p.Wait(ctx); ctx.Err() != nil {
		t.Fatalf("%s did not end after SIGTERM: %v", name, err)
	}
	up, err := ts.start("upstream-"+name, bin, ts.SidecarArgs(name), baseEnv())
	if err != nil {
		t.Fatalf("start upstream %s: %v", name, err)
	}
	t.Logf("Stowage's %s stopped; upstream's %s started in its place (pid %d)", name, bin, up.Pid())
	return up
}
