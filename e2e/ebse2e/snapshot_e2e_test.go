//go:build e2e

package ebse2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestE2EEBSSnapshotRestore runs scenario 1 (a file written to an ext4 volume on node A), scenario 6 (that
// volume snapshotted through the CSI controller, pre-provisioned as a VolumeSnapshot, restored by
// csi-provisioner into node C's zone and read back on node C) and scenario 4 (everything deleted, EC2 left
// empty) on the whole stack, then checks that stopping it leaves no process, loop device or mount.
func TestE2EEBSSnapshotRestore(t *testing.T) {
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
		{"snapshot and restore", l.SnapshotRestore},
		{"delete", l.Delete},
	} {
		if err := sc.run(ctx); err != nil {
			t.Logf("steps:%s", out.String())
			t.Fatalf("scenario %s: %v", sc.name, err)
		}
	}
	var summary strings.Builder
	report.Summary(&summary)
	t.Logf("steps:%s\n%s", out.String(), summary.String())

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
}
