//go:build bench

package statefulsetstorm_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// EC2's delays as ec2sim draws them at time scale 1 (e2e/ec2sim/transitions.go: create 1-3 s, attach 2-4 s,
// detach 1-3 s, each uniform): the slowest of N volumes comes close to the top of each range.
const (
	createMax = 3 * time.Second
	attachMax = 4 * time.Second
	detachMax = 3 * time.Second
)

// floor is the least a storm can take: for the slowest Pod, EC2's longest create and attach, the stage's mkfs
// and the scheduler's part; for the deletion, EC2's longest detach (ec2sim deletes at once).
type floor struct {
	mkfs, sched      time.Duration
	running, deleted time.Duration
}

func newFloor(mkfs, sched time.Duration) floor {
	return floor{mkfs: mkfs, sched: sched, running: sched + createMax + attachMax + mkfs, deleted: detachMax}
}

// mkfsTime times the node stage's format of one 1 GiB volume on this machine: mkfs.ext4 with the options
// Kubernetes' mount library passes (-F -m0), on a sparse file of the volume's size as ec2sim's volumes are.
func mkfsTime(t *testing.T, ctx context.Context) time.Duration {
	t.Helper()
	f := filepath.Join(t.TempDir(), "volume")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(f, 1<<30); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", "-F", "-m0", "-q", f).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	return time.Since(start)
}
