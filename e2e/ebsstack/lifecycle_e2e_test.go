//go:build e2e

package ebsstack

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// testTimeScale runs EC2's delays at 2% of their real length.
const testTimeScale = 0.02

// TestE2EEBSLifecycle runs scenarios 1 to 6 on the whole stack with three simulated nodes (two in
// us-east-1a, one in us-east-1b), then checks that stopping the stack leaves no process, loop device or
// mount behind.
func TestE2EEBSLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := Start(ctx, Options{TimeScale: testTimeScale, Dir: dir, Progress: func(f string, a ...any) { t.Logf(f, a...) }})
	if err != nil {
		t.Fatalf("start stack: %v", err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if t.Failed() {
			t.Logf("logs:\n%s", s.LogTails(40))
		}
		if err := s.Stop(); err != nil {
			t.Errorf("stop stack: %v", err)
		}
	}
	t.Cleanup(stop)

	var out strings.Builder
	report := NewReport(&out)
	l, err := NewLifecycle(s, report)
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
	} {
		if err := sc.run(ctx); err != nil {
			t.Logf("steps:%s", out.String())
			t.Fatalf("scenario %s: %v", sc.name, err)
		}
	}
	var summary strings.Builder
	report.Summary(&summary)
	t.Logf("steps:%s\n%s", out.String(), summary.String())

	stopLeavesNothing(t, s, dir, stop)
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}

// stopLeavesNothing runs stop (which stops the stack s, whose directory is dir) and checks that nothing the
// stack started outlives it: no process of its own, no loop device or mount under dir, and no process
// whose command line names dir (a binary from it, a control-plane process with its data directory).
func stopLeavesNothing(t *testing.T, s *Stack, dir string, stop func()) {
	t.Helper()
	procs := s.Processes()
	stop()
	for _, p := range procs {
		if done, _ := p.Exited(); !done {
			t.Errorf("%s (pid %d) still running after Stop", p.Name, p.Pid())
		}
	}
	if loops := LoopDevicesUnder(dir); len(loops) > 0 {
		t.Errorf("loop devices left: %v", loops)
	}
	if mounts, err := MountsUnder(dir); err != nil || len(mounts) > 0 {
		t.Errorf("mounts left: %v (%v)", mounts, err)
	}
	if out, err := exec.Command("pgrep", "-a", "-f", dir).Output(); err == nil && len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("processes left:\n%s", out)
	}
}
