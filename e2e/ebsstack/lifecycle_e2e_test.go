//go:build e2e

package ebsstack

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/ebsinstall"
	"github.com/stowage-csi/stowage/e2e/kubeletsim"
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
	for _, sc := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"provision", l.Provision},
		{"move while node A's pre-stop hook waits", func(ctx context.Context) error { return withPreStopHook(ctx, s.Stack, l.NodeA, l.Move) }},
		{"xfs and block", l.FilesystemsAndBlock},
		{"snapshot and restore", l.SnapshotRestore},
		{"delete", l.Delete},
		{"bad parameter", l.BadParameter},
		{"generic ephemeral volumes", l.EphemeralVolumes},
		{"expand and modify", l.ExpandModify},
	} {
		passed := t.Run(sc.name, func(t *testing.T) {
			if err := sc.run(ctx); err != nil {
				t.Fatalf("scenario %s: %v", sc.name, err)
			}
		})
		if !passed {
			break
		}
	}
	var summary strings.Builder
	report.Summary(&summary)
	t.Logf("steps:%s\n%s", out.String(), summary.String())

	s.stopLeavesNothing(t)
	if _, err := os.Stat(s.dir); err != nil {
		t.Fatal(err)
	}
}

// TestE2ELifecycleOnRealNodes runs the demo's scenarios (and the bad parameter) on real kubelets with the
// chart installed as users install it (ebsinstall): nodes A and B in us-east-1a, C in us-east-1b, the Pods
// real containers, the kubelet calling NodeStage, NodePublish and NodeExpandVolume. It ends with no volume
// in EC2 and no CSI mount on any node, and after the teardown no loop device or mount of the run on the host.
// Move runs without the pre-stop hook of the process test: holding a node plugin's pre-stop needs the
// plugin as a process of the test, and no node is drained here.
func TestE2ELifecycleOnRealNodes(t *testing.T) {
	dir := t.TempDir()
	// Registered before the install's own cleanup, so it runs after the teardown.
	t.Cleanup(func() {
		if loops := LoopDevicesUnder(dir); len(loops) > 0 {
			t.Errorf("loop devices left after the teardown: %v", loops)
		}
		if mounts, err := kubeletsim.MountsUnder(dir); err != nil || len(mounts) > 0 {
			t.Errorf("mounts left after the teardown: %v (%v)", mounts, err)
		}
	})
	zone := func(z string) string { return ebsinstall.Region + z }
	s := ebsinstall.ForTest(t, ebsinstall.Options{Zones: []string{zone("a"), zone("a"), zone("b")}, TimeScale: 0.02, Dir: dir})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	p, err := OnRealNodes(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	report := NewReport(&out)
	l, err := NewLifecycleOn(p, report)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"provision", l.Provision},
		{"move", l.Move},
		{"xfs and block", l.FilesystemsAndBlock},
		{"snapshot and restore", l.SnapshotRestore},
		{"delete", l.Delete},
		{"bad parameter", l.BadParameter},
		{"generic ephemeral volumes", l.EphemeralVolumes},
		{"expand and modify", l.ExpandModify},
	} {
		passed := t.Run(sc.name, func(t *testing.T) {
			if err := sc.run(ctx); err != nil {
				t.Fatalf("scenario %s: %v", sc.name, err)
			}
		})
		if !passed {
			break
		}
	}
	var summary strings.Builder
	report.Summary(&summary)
	t.Logf("steps:%s\n%s", out.String(), summary.String())
	if t.Failed() {
		return
	}
	if vols := s.EC2.State().Volumes; len(vols) > 0 {
		t.Errorf("EC2 still holds %d volumes: %v", len(vols), vols)
	}
	for _, name := range p.NodeNames() {
		if mounts, err := p.Node(name).CSIMountsLeft(); err != nil || len(mounts) > 0 {
			t.Errorf("CSI mounts left on %s: %v (%v)", name, mounts, err)
		}
	}
}
