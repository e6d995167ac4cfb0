//go:build e2e

package ebsstack

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

// scaleFaults are the steady faults of a run at scale, on every EC2 call for the whole run: 10% throttled,
// 2% 500 InternalError, and 2% of the mutating calls carried out with the answer lost; a quarter of the
// attaches are slowed by 3 s (ec2sim's Slow, on top of the attach's own 2-4 s, scaled), every other call
// answers at once.
func scaleFaults(seed uint64) ec2sim.Faults {
	f := chaosFaults(0, seed)
	f.ThrottleRate, f.InternalErrorRate, f.DropRate, f.LostAnswerRate = 0.10, 0.02, 0, 0.02
	f.Slow = map[string]ec2sim.SlowCalls{"AttachVolume": {Rate: 0.25, Latency: 3 * time.Second}}
	return f
}

// slowedCalls are the calls the Slow fault held, by action.
func slowedCalls(ec2 *ec2sim.Server) map[string]int {
	out := map[string]int{}
	for _, action := range ec2sim.Actions() {
		if n := ec2.Slowed(action); n > 0 {
			out[action] = n
		}
	}
	return out
}

// runAtScale takes scale.Lifecycles volumes through their life in waves that fit the nodes' attach limits:
// each wave's claims (and two abandoned ones) are created with their Pods and must all run attached to only
// their node; each volume is snapshotted once (the snapshot then deleted); then every Pod and claim is
// deleted and nothing may be left before the next wave. The faults stay on and a random Stowage process is
// SIGKILLed every scale.KillEvery throughout, across the waves (each process once per round, PlanEvery).
func (r *chaosRun) runAtScale(ctx context.Context, t *testing.T, scale ChaosScale) {
	perNode := min(scale.PerNode, r.attachLimit(ctx, t))
	waves := Waves(scale.Lifecycles, perNode*len(r.s.NodeOrder))
	var targets []string
	for _, p := range r.s.Processes() {
		targets = append(targets, p.Name)
	}
	deadline, _ := ctx.Deadline()
	plan := PlanEvery(r.rng, scale.KillEvery, time.Until(deadline), targets)
	t.Logf("%d lifecycles in %d waves of up to %d per node; a SIGKILL of one of %v every %s",
		scale.Lifecycles, len(waves), perNode, slices.Sorted(slices.Values(targets)), scale.KillEvery)

	r.s.EC2.SetFaults(scaleFaults(r.seed))
	killCtx, stopKills := context.WithCancel(ctx)
	killed := make(chan error, 1)
	go func() { killed <- r.chaos.Execute(killCtx, plan) }()
	ok := true
	for w, n := range waves {
		name := fmt.Sprintf("wave %d of %d: %d lifecycles", w+1, len(waves), n)
		if ok = t.Run(name, func(t *testing.T) { r.wave(ctx, t, w, n) }); !ok {
			break
		}
		r.totals.Lifecycles += n
		r.totals.Snapshots += n
		r.totals.Waves++
	}
	stopKills()
	if err := <-killed; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("kill plan: %v", err)
	}
	logFaults(t, r.s.Stack, "the run at scale")
	if !ok {
		t.FailNow()
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := r.chaos.WaitRunning(waitCtx); err != nil {
		t.Fatal(err)
	}
}

// wave runs one wave of n lifecycles (see runAtScale).
func (r *chaosRun) wave(ctx context.Context, t *testing.T, w, n int) {
	start := time.Now()
	r.claimNode = map[string]string{}
	tag := fmt.Sprintf("w%d-", w)
	if err := r.createClaims(ctx, tag, n, chaosAbandoned); err != nil {
		t.Fatalf("create the claims: %v", err)
	}
	r.checkRunning(ctx, t)
	t.Logf("%d Pods running, each volume attached to only its node, after %s", n, FormatDuration(time.Since(start)))
	snapCtx, cancel := context.WithTimeout(ctx, chaosConverge+time.Duration(n)*time.Second)
	defer cancel()
	if err := r.snaps.run(snapCtx, "snap-", slices.Sorted(maps.Keys(r.claimNode))); err != nil {
		t.Fatalf("snapshots: %v", err)
	}
	t.Logf("one EBS snapshot per volume, all deleted, after %s", FormatDuration(time.Since(start)))
	if err := r.deleteClaims(ctx); err != nil {
		t.Fatalf("delete the claims: %v", err)
	}
	r.waitEmpty(ctx, t)
	t.Logf("wave %d: everything deleted after %s", w+1, FormatDuration(time.Since(start)))
}

// attachLimit is the smallest number of volumes a node's CSINode says the node can attach.
func (r *chaosRun) attachLimit(ctx context.Context, t *testing.T) int {
	t.Helper()
	limit := 0
	for _, node := range r.s.NodeOrder {
		var n int
		err := poll(ctx, "CSINode "+node+" with an attach limit", func(ctx context.Context) (bool, string, error) {
			cn, err := r.s.Client.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			for _, d := range cn.Spec.Drivers {
				if d.Name == Driver && d.Allocatable != nil && d.Allocatable.Count != nil {
					n = int(*d.Allocatable.Count)
					return true, "", nil
				}
			}
			return false, "no allocatable count for " + Driver, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if limit == 0 || n < limit {
			limit = n
		}
	}
	t.Logf("attach limit per node (CSINode allocatable): %d", limit)
	return limit
}
