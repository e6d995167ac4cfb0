//go:build e2e

package ebsstack

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

const (
	// chaosSeedEnv replays a run: the seed fixes the kill plan, the restart back-offs, the creation order and
	// the emulator's fault draws (which replay as far as the requests come in the same order).
	chaosSeedEnv = "STOWAGE_CHAOS_SEED"
	// chaosLogsEnv names a directory the run copies every process's whole log to, for reading afterwards.
	chaosLogsEnv = "STOWAGE_CHAOS_LOGS"
	// chaosClaims get a Pod each, spread over the nodes; chaosAbandoned are deleted while being provisioned.
	chaosClaims    = 9
	chaosAbandoned = 2
	// chaosSnapshotCount of the short form's volumes are snapshotted.
	chaosSnapshotCount = 3
	// chaosConverge bounds each wait after the chaos has stopped: a killed sidecar's successor waits out
	// the 15 s Lease of its predecessor, and retries back off to 30 s.
	chaosConverge = 2 * time.Minute
)

// chaosFaults throttle, fail or drop the EC2 calls of a phase, Describe calls included, or carry out a
// mutating one and lose its answer, and slow some attaches (ec2sim's Slow: only AttachVolume waits, as when
// EC2's attach path is congested); the SDK, ebs-plugin and the sidecars retry. Most of a phase's calls come
// after its kills (a killed sidecar's successor waits out the Lease first), so the faults stay on until the
// phase has converged, and budget bounds them instead: after that many failed calls EC2 answers again (the
// slow attaches go on), so the phase converges.
func chaosFaults(budget int, seed uint64) ec2sim.Faults {
	return ec2sim.Faults{
		ThrottleRate: 0.2, InternalErrorRate: 0.15, DropRate: 0.05, LostAnswerRate: 0.1,
		Slow:   map[string]ec2sim.SlowCalls{"AttachVolume": {Rate: 0.3, Latency: 2 * time.Second}},
		Budget: budget, Seed: seed,
	}
}

// TestE2EEBSChaos provisions, attaches and stages a batch of volumes (two more claims are deleted while
// being provisioned), snapshots three of them through VolumeSnapshots (Stowage's snapshot-controller and
// csi-snapshotter), and deletes everything, while the EC2 emulator throttles, fails and drops calls (Describe
// calls too), loses the answers of mutating calls and slows attaches, and csi-provisioner, csi-attacher,
// csi-snapshotter, snapshot-controller, ebs-plugin's controller and a node plugin are SIGKILLed and restarted
// at random moments. Throughout, no EBS volume may be attached to two instances or have two attached
// VolumeAttachments; after provisioning every Pod runs with its volume attached to exactly its node and EC2
// holds no other volume; each VolumeSnapshot gets exactly one EBS snapshot, its content's handle; after
// deletion nothing is left: no claim, PV, VolumeAttachment, VolumeSnapshot, VolumeSnapshotContent, EBS volume,
// attachment or snapshot, loop device or mount, no panic in any log, and no process after Stop. Each phase is
// a subtest. It prints how long after each kill the killed process's successor first did work (from its
// log), and the median and maximum per component. The test logs its seed; STOWAGE_CHAOS_SEED=<seed> replays
// the kill plan and the emulator's fault draws.
//
// With STOWAGE_CHAOS_LIFECYCLES=<n> (`make chaos`) it runs at scale instead (runAtScale): n volume lifecycles
// with a snapshot each, in waves, under steady faults and a SIGKILL every 20 s, with the same checks. Both
// forms end with a table of the run: lifecycles, EC2 calls and faults by kind (mutating and Describe), slowed
// attaches, kills per process, recoveries, time.
func TestE2EEBSChaos(t *testing.T) {
	began := time.Now()
	seed := chaosSeed(t)
	scale, err := ChaosScaleFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout(t, scale))
	defer cancel()
	// The chaos goroutine draws its back-offs from a source of its own, so the plan and the work's draws
	// do not depend on goroutine timing.
	r := &chaosRun{seed: seed, rng: rand.New(rand.NewPCG(seed, 1)), claimNode: map[string]string{}}
	r.s = startTestStack(ctx, t, Options{With: SnapshotSidecars}, func() { r.beforeStop(t) })
	r.totals.Setup = time.Since(began)
	r.chaos = NewChaos(r.s.Stack, rand.New(rand.NewPCG(seed, 2)), t.Logf)
	endSupervision := r.supervise(ctx, t)
	watch := startWatch(ctx, r.s.Stack)
	t.Cleanup(watch.stop)

	if _, err := r.s.Client.StorageV1().StorageClasses().Create(ctx, filesystemClass("stowage-ext4", "ext4"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if r.snaps, err = newChaosSnapshotter(ctx, r.s.Stack); err != nil {
		t.Fatal(err)
	}
	if scale.Lifecycles > 0 {
		r.runAtScale(ctx, t, scale)
	} else {
		r.runShort(ctx, t)
	}

	t.Run("no double attachment, panic or missing fault", func(t *testing.T) {
		if err := endSupervision(); err != nil {
			t.Errorf("supervision: %v", err)
		}
		watch.stop()
		watch.report(t)
		t.Logf("chaos events:\n%s", r.chaos.Events())
		var recovery strings.Builder
		recs, err := r.chaos.RecoveryReport(&recovery)
		if err != nil {
			t.Errorf("recovery times: %v", err)
		} else {
			t.Logf("recovery: time from each SIGKILL to the first operation its successor logged (it includes waiting for work, "+
				"and for a sidecar its predecessor's Lease):\n%s", recovery.String())
		}
		if exits := r.chaos.OwnExits(); len(exits) > 0 {
			t.Logf("processes that ended on their own (restarted): %v", exits)
		}
		checkLogs(t, r.s.Stack)
		answers, err := answerCounts(ctx, t, r.s.Stack)
		if err != nil {
			t.Fatalf("read the emulator's metrics: %v", err)
		}
		t.Logf("EC2 answers by action and code: %v", answers)
		r.totals.Calls, r.totals.Faults = faultsByKind(answers)
		r.totals.Slowed = slowedCalls(r.s.EC2)
		for _, class := range []struct {
			name  string
			count func(FaultCounts) int
		}{{"mutating", func(c FaultCounts) int { return c.Mutating }}, {"Describe", func(c FaultCounts) int { return c.Describe }}} {
			n := 0
			for _, c := range r.totals.Faults {
				n += class.count(c)
			}
			if n == 0 {
				t.Errorf("the emulator injected no fault into %s calls: the chaos did not happen", class.name)
			}
		}
		if r.totals.Slowed["AttachVolume"] == 0 {
			t.Errorf("no AttachVolume was slowed: the slow attaches did not happen")
		}
		r.totals.Kills, r.totals.Seed, r.totals.Took = len(recs), r.seed, time.Since(began)
		var table strings.Builder
		ChaosTable(&table, r.totals, recs)
		t.Logf("chaos run:\n%s", table.String())
	})
	r.s.stopLeavesNothing(t)
}

// chaosRun is the state TestE2EEBSChaos's phases share.
type chaosRun struct {
	s          *testStack
	seed       uint64
	rng        *rand.Rand
	chaos      *Chaos
	nodePlugin string            // the node plugin the plans kill
	claimNode  map[string]string // the claims (of the wave, at scale) -> node
	volumes    map[string]string // EBS volume ID -> node, once provisioned
	snaps      *chaosSnapshotter
	totals     ChaosTotals
}

// chaosTimeout bounds the whole test: the short form stays under go test's default 10-minute limit, whose
// panic would skip the cleanups and leave mounts; a run at scale gets go test's -timeout less 3 minutes for
// the cleanups.
func chaosTimeout(t *testing.T, scale ChaosScale) time.Duration {
	deadline, ok := t.Deadline()
	if scale.Lifecycles == 0 || !ok {
		return 8 * time.Minute
	}
	return time.Until(deadline) - 3*time.Minute
}

// runShort is the short form: one batch of claims provisioned, snapshotted and deleted, each phase under a
// kill plan of its own and faults bounded by a budget.
func (r *chaosRun) runShort(ctx context.Context, t *testing.T) {
	r.nodePlugin = "ebs-plugin-" + r.s.NodeOrder[r.rng.IntN(len(r.s.NodeOrder))]
	for _, phase := range []struct {
		name string
		run  func(context.Context, *testing.T)
	}{
		{"provision under chaos", r.provision},
		{"snapshot under chaos", r.snapshot},
		{"delete under chaos", r.delete},
	} {
		if !t.Run(phase.name, func(t *testing.T) { phase.run(ctx, t) }) {
			t.FailNow()
		}
	}
	r.totals.Lifecycles, r.totals.Waves, r.totals.Snapshots = chaosClaims, 1, chaosSnapshotCount
}

// chaosSeed is STOWAGE_CHAOS_SEED, or a new seed; it is logged for a replay.
func chaosSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(chaosSeedEnv); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", chaosSeedEnv, v, err)
		}
	}
	t.Logf("chaos seed %d (replay with %s=%d)", seed, chaosSeedEnv, seed)
	return seed
}

// beforeStop logs the seed and the chaos events of a failed run, and copies the logs where
// STOWAGE_CHAOS_LOGS says.
func (r *chaosRun) beforeStop(t *testing.T) {
	if t.Failed() && r.chaos != nil {
		t.Logf("seed %d; chaos events:\n%s", r.seed, r.chaos.Events())
	}
	if keep := os.Getenv(chaosLogsEnv); keep != "" {
		out, err := exec.Command("cp", "-r", filepath.Join(r.s.dir, "logs"), keep).CombinedOutput()
		t.Logf("copied the logs to %s: %v %s", keep, err, out)
	}
}

// supervise runs Chaos.Supervise until the returned function (or the test's cleanup) ends it; it returns
// Supervise's error. Cleanups run last-in first-out, so supervision (and its restarts) ends before the
// stack stops.
func (r *chaosRun) supervise(ctx context.Context, t *testing.T) func() error {
	ctx, cancel := context.WithCancel(ctx)
	supervised := make(chan error, 1)
	go func() { supervised <- r.chaos.Supervise(ctx) }()
	end := sync.OnceValue(func() error {
		cancel()
		return <-supervised
	})
	t.Cleanup(func() { _ = end() })
	return end
}

// provision creates the claims and Pods (and the abandoned claims) under faults and kills, then checks that
// every Pod runs with its volume attached to exactly its node.
func (r *chaosRun) provision(ctx context.Context, t *testing.T) {
	plan := PlanKills(r.rng, 500*time.Millisecond, 12*time.Second, map[string]int{
		"csi-provisioner": 2, "csi-attacher": 2, "ebs-plugin-controller": 2, r.nodePlugin: 1,
	})
	r.s.EC2.SetFaults(chaosFaults(30, r.seed))
	defer logFaults(t, r.s.Stack, "provisioning")
	runChaos(ctx, t, r.chaos, plan, func() error { return r.createClaims(ctx, "", chaosClaims, chaosAbandoned) })
	t.Logf("kills over; waiting for every Pod to run")
	r.volumes = r.checkRunning(ctx, t)
}

// createClaims creates n claims (named chaos-<wave><i>), each with its Pod, spread evenly over the nodes, in a
// random order and at random gaps; the abandoned claims are deleted again while they are being provisioned,
// before any Pod uses them.
func (r *chaosRun) createClaims(ctx context.Context, wave string, n, abandoned int) error {
	claims := r.s.Client.CoreV1().PersistentVolumeClaims(Namespace)
	for _, i := range r.rng.Perm(n + abandoned) {
		time.Sleep(time.Duration(r.rng.IntN(400)) * time.Millisecond)
		node := r.s.NodeOrder[i%len(r.s.NodeOrder)]
		if i >= n {
			name := fmt.Sprintf("abandoned-%s%d", wave, i-n)
			if _, err := claims.Create(ctx, Claim(name, "stowage-ext4", "1Gi", node, false), metav1.CreateOptions{}); err != nil {
				return err
			}
			after := time.Duration(500+r.rng.IntN(3000)) * time.Millisecond
			go func() {
				time.Sleep(after)
				_ = claims.Delete(ctx, name, metav1.DeleteOptions{})
			}()
			continue
		}
		claim := fmt.Sprintf("chaos-%s%d", wave, i)
		r.claimNode[claim] = node
		if _, err := claims.Create(ctx, Claim(claim, "stowage-ext4", "1Gi", node, false), metav1.CreateOptions{}); err != nil {
			return err
		}
		if _, err := r.s.Client.CoreV1().Pods(Namespace).Create(ctx, Pod("pod-"+claim, node, claim, false), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// snapshot snapshots three claims through snapshot-controller and csi-snapshotter and deletes the
// snapshots, while both and the controller are killed and EC2 misbehaves.
func (r *chaosRun) snapshot(ctx context.Context, t *testing.T) {
	plan := PlanKills(r.rng, 200*time.Millisecond, 3*time.Second, map[string]int{
		"ebs-plugin-controller": 1, "csi-snapshotter": 1, "snapshot-controller": 1,
	})
	r.s.EC2.SetFaults(chaosFaults(10, r.seed+1))
	defer logFaults(t, r.s.Stack, "snapshots")
	claims := slices.Sorted(maps.Keys(r.claimNode))[:chaosSnapshotCount]
	runChaos(ctx, t, r.chaos, plan, func() error {
		ctx, cancel := context.WithTimeout(ctx, chaosConverge)
		defer cancel()
		return r.snaps.run(ctx, "snap-", claims)
	})
	t.Logf("one EBS snapshot per volume through VolumeSnapshots, all deleted")
}

// delete deletes every Pod and claim under faults and kills, then waits until nothing is left.
func (r *chaosRun) delete(ctx context.Context, t *testing.T) {
	plan := PlanKills(r.rng, 300*time.Millisecond, 8*time.Second, map[string]int{
		"csi-provisioner": 1, "csi-attacher": 1, "ebs-plugin-controller": 1, r.nodePlugin: 1,
	})
	r.s.EC2.SetFaults(chaosFaults(22, r.seed+2))
	defer logFaults(t, r.s.Stack, "deletion")
	runChaos(ctx, t, r.chaos, plan, func() error { return r.deleteClaims(ctx) })
	t.Logf("kills over; waiting for everything to be gone")
	r.waitEmpty(ctx, t)
}

// deleteClaims deletes every Pod and claim of r.claimNode, in name order, at random gaps.
func (r *chaosRun) deleteClaims(ctx context.Context) error {
	kube := r.s.Client
	for _, claim := range slices.Sorted(maps.Keys(r.claimNode)) {
		if err := kube.CoreV1().Pods(Namespace).Delete(ctx, "pod-"+claim, metav1.DeleteOptions{}); err != nil {
			return err
		}
		if err := kube.CoreV1().PersistentVolumeClaims(Namespace).Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
			return err
		}
		time.Sleep(time.Duration(r.rng.IntN(300)) * time.Millisecond)
	}
	return nil
}

// runChaos runs work while the kill plan is carried out, then waits until every process runs again.
func runChaos(ctx context.Context, t *testing.T, c *Chaos, plan []Kill, work func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Execute(ctx, plan) }()
	werr := work()
	if err := <-done; err != nil {
		t.Fatalf("kill plan: %v", err)
	}
	if werr != nil {
		t.Fatalf("work under chaos: %v", werr)
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.WaitRunning(waitCtx); err != nil {
		t.Fatal(err)
	}
}
