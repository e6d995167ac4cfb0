//go:build e2e

package ebsstack

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stowage-csi/stowage/e2e/kubeletsim"
)

// testTimeScale runs EC2's delays at 2% of their real length.
const testTimeScale = 0.02

// testStack is a Stack started for one test in the test's temporary directory.
type testStack struct {
	*Stack
	dir string
	// stop stops the stack once (later calls do nothing); it is also the test's cleanup.
	stop func()
}

// startTestStack starts the stack with the default nodes and opts (its time scale, folder and progress are the
// test's). beforeStop (may be nil) runs right before the
// stack stops, to log or copy what a failed run needs; the stack's log tails are logged when the test failed.
func startTestStack(ctx context.Context, t *testing.T, opts Options, beforeStop func()) *testStack {
	t.Helper()
	dir := t.TempDir()
	opts.TimeScale, opts.Dir, opts.Progress = testTimeScale, dir, func(f string, a ...any) { t.Logf(f, a...) }
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start stack: %v", err)
	}
	ts := &testStack{Stack: s, dir: dir}
	ts.stop = sync.OnceFunc(func() {
		if beforeStop != nil {
			beforeStop()
		}
		if t.Failed() {
			t.Logf("logs:\n%s", s.LogTails(60))
		}
		if err := s.Stop(); err != nil {
			t.Errorf("stop stack: %v", err)
		}
	})
	t.Cleanup(ts.stop)
	return ts
}

// stopLeavesNothing stops the stack and checks that nothing it started outlives it: no process of its own,
// no loop device or mount under its directory, and no process whose command line names the directory (a
// binary from it, a control-plane process with its data directory).
func (ts *testStack) stopLeavesNothing(t *testing.T) {
	t.Helper()
	procs := ts.Processes()
	ts.stop()
	for _, p := range procs {
		if done, _ := p.Exited(); !done {
			t.Errorf("%s (pid %d) still running after Stop", p.Name, p.Pid())
		}
	}
	if loops := LoopDevicesUnder(ts.dir); len(loops) > 0 {
		t.Errorf("loop devices left: %v", loops)
	}
	if mounts, err := kubeletsim.MountsUnder(ts.dir); err != nil || len(mounts) > 0 {
		t.Errorf("mounts left: %v (%v)", mounts, err)
	}
	if out, err := exec.Command("pgrep", "-a", "-f", ts.dir).Output(); err == nil && len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("processes left:\n%s", out)
	}
}
