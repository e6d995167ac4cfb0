//go:build e2e

package ebsstack

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestE2EEBSLifecycle runs scenarios 1 to 7 and expand-and-modify on the whole stack with three simulated
// nodes (two in us-east-1a, one in us-east-1b), each scenario a subtest, then checks that stopping the stack
// leaves no process, loop device or mount behind. The controller Pod's sidecars run as upstream's manifests
// run them: with their args, under one ServiceAccount bound to all their roles (the other e2e tests run each
// sidecar under its own role alone). Scenarios 1 to 5 build on each other: the first that fails ends the
// run.
func TestE2EEBSLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// Every container runs with the args and the RBAC of upstream's own manifests: the drop-in contract.
	with := append([]string{"csi-resizer"}, SnapshotSidecars...)
	s := startTestStack(ctx, t, Options{UpstreamArgs: true, UnionRBAC: true, With: with}, nil)
	if kc := s.Kubeconfigs["csi-provisioner"]; kc == "" || kc != s.Kubeconfigs["csi-resizer"] || kc != s.Kubeconfigs["csi-snapshotter"] {
		t.Fatalf("the controller Pod's sidecars do not share %s: %v", UnionAccount, s.Kubeconfigs)
	}

	var out strings.Builder
	report := NewReport(&out)
	l, err := NewLifecycle(s.Stack, report)
	if err != nil {
		t.Fatal(err)
	}
	move := Scenario{"move while node A's pre-stop hook waits", func(ctx context.Context) error { return withPreStopHook(ctx, s.Stack, l.NodeA, l.Move) }}
	RunScenarios(t, ctx, l.TestScenarios(move), report, &out)

	s.stopLeavesNothing(t)
	if _, err := os.Stat(s.dir); err != nil {
		t.Fatal(err)
	}
}
