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
	// chaosConverge bounds each wait after the chaos has stopped: a killed sidecar's successor waits out
	// the 15 s Lease of its predecessor, and retries back off to 30 s.
	chaosConverge = 2 * time.Minute
)

// chaosFaults throttle, fail, drop or slow the mutating EC2 calls of a phase, or carry them out and lose the
// answer; the SDK, ebs-plugin and the sidecars retry. Most of a phase's calls come after its kills (a killed sidecar's successor waits out
// the Lease first), so the faults stay on until the phase has converged, and budget bounds them instead:
// after that many failed calls EC2 answers again (only slowly), so the phase converges.
func chaosFaults(budget int, seed uint64) ec2sim.Faults {
	return ec2sim.Faults{
		Actions: []string{"CreateVolume", "DeleteVolume", "AttachVolume", "DetachVolume", "CreateTags",
			"ModifyVolume", "CreateSnapshot", "DeleteSnapshot"},
		ThrottleRate: 0.2, InternalErrorRate: 0.15, DropRate: 0.05, LostAnswerRate: 0.1, Latency: 30 * time.Millisecond,
		Budget: budget, Seed: seed,
	}
}

// TestE2EEBSChaos provisions, attaches and stages a batch of volumes (two more claims are deleted while
// being provisioned), snapshots three of them, and deletes everything, while the EC2 emulator throttles,
// fails, drops, slows and loses the answers of mutating calls and csi-provisioner, csi-attacher, ebs-plugin's controller and a node
// plugin are SIGKILLed and restarted at random moments. Throughout, no EBS volume may be attached to two
// instances or have two attached VolumeAttachments; after provisioning every Pod runs with its volume
// attached to exactly its node and EC2 holds no other volume; each snapshot exists once; after deletion
// nothing is left: no claim, PV, VolumeAttachment, EBS volume, attachment or snapshot, loop device or mount,
// no panic in any log, and no process after Stop. Each phase is a subtest. It prints how long after each
// kill the killed process's successor first did work (from its log), and the median and maximum per
// component. The test logs its seed;
// STOWAGE_CHAOS_SEED=<seed> replays the kill plan.
func TestE2EEBSChaos(t *testing.T) {
	seed := chaosSeed(t)
	// Under go test's default 10-minute limit, whose panic would skip the cleanups and leave mounts.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// The chaos goroutine draws its back-offs from a source of its own, so the plan and the work's draws
	// do not depend on goroutine timing.
	r := &chaosRun{seed: seed, rng: rand.New(rand.NewPCG(seed, 1)), claimNode: map[string]string{}}
	r.s = startTestStack(ctx, t, Options{}, func() { r.beforeStop(t) })
	r.chaos = NewChaos(r.s.Stack, rand.New(rand.NewPCG(seed, 2)), t.Logf)
	endSupervision := r.supervise(ctx, t)
	watch := startWatch(ctx, r.s.Stack)
	t.Cleanup(watch.stop)

	if _, err := r.s.Client.StorageV1().StorageClasses().Create(ctx, filesystemClass("stowage-ext4", "ext4"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
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

	t.Run("no double attachment, panic or missing fault", func(t *testing.T) {
		if err := endSupervision(); err != nil {
			t.Errorf("supervision: %v", err)
		}
		watch.stop()
		watch.report(t)
		t.Logf("chaos events:\n%s", r.chaos.Events())
		var recovery strings.Builder
		if err := r.chaos.RecoveryReport(&recovery); err != nil {
			t.Errorf("recovery times: %v", err)
		} else {
			t.Logf("recovery: time from each SIGKILL to the first operation its successor logged (it includes waiting for work, "+
				"and for a sidecar its predecessor's Lease):\n%s", recovery.String())
		}
		if exits := r.chaos.OwnExits(); len(exits) > 0 {
			t.Logf("processes that ended on their own (restarted): %v", exits)
		}
		checkLogs(t, r.s.Stack)
		injected, err := faultCounts(ctx, t, r.s.Stack)
		if err != nil {
			t.Fatalf("read the emulator's metrics: %v", err)
		}
		t.Logf("EC2 answers by code: %v", injected)
		if injected["RequestLimitExceeded"]+injected["InternalError"]+injected["Dropped"]+injected["LostAnswerDropped"]+injected["LostAnswerInternalError"] == 0 {
			t.Errorf("the emulator injected no fault: the chaos did not happen")
		}
	})
	r.s.stopLeavesNothing(t)
}

// chaosRun is the state TestE2EEBSChaos's phases share.
type chaosRun struct {
	s          *testStack
	seed       uint64
	rng        *rand.Rand
	chaos      *Chaos
	nodePlugin string // the node plugin the plans kill
	claimNode  map[string]string
	volumes    map[string]string // EBS volume ID -> node, once provisioned
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
	r.s.EC2.SetFaults(chaosFaults(20, r.seed))
	defer logFaults(t, r.s.Stack, "provisioning")
	runChaos(ctx, t, r.chaos, plan, func() error { return r.createClaims(ctx) })
	t.Logf("kills over; waiting for every Pod to run")
	r.volumes = r.checkRunning(ctx, t)
}

// createClaims creates the claims, each with its Pod, in a random order and at random gaps; the abandoned
// claims are deleted again while they are being provisioned, before any Pod uses them.
func (r *chaosRun) createClaims(ctx context.Context) error {
	claims := r.s.Client.CoreV1().PersistentVolumeClaims(Namespace)
	for _, i := range r.rng.Perm(chaosClaims + chaosAbandoned) {
		time.Sleep(time.Duration(r.rng.IntN(400)) * time.Millisecond)
		node := r.s.NodeOrder[i%len(r.s.NodeOrder)]
		if i >= chaosClaims {
			name := fmt.Sprintf("abandoned-%d", i-chaosClaims)
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
		claim := fmt.Sprintf("chaos-%d", i)
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

// snapshot snapshots three volumes and deletes the snapshots while the controller is killed and EC2
// misbehaves.
func (r *chaosRun) snapshot(ctx context.Context, t *testing.T) {
	plan := PlanKills(r.rng, 200*time.Millisecond, 3*time.Second, map[string]int{"ebs-plugin-controller": 2})
	r.s.EC2.SetFaults(chaosFaults(6, r.seed+1))
	defer logFaults(t, r.s.Stack, "snapshots")
	volumes := snapshotVolumes(t, r.volumes, 3)
	runChaos(ctx, t, r.chaos, plan, func() error {
		ctx, cancel := context.WithTimeout(ctx, chaosConverge)
		defer cancel()
		return chaosSnapshots(ctx, r.s.Stack, volumes)
	})
	t.Logf("one EBS snapshot per volume, all deleted")
}

// delete deletes every Pod and claim under faults and kills, then waits until nothing is left.
func (r *chaosRun) delete(ctx context.Context, t *testing.T) {
	plan := PlanKills(r.rng, 300*time.Millisecond, 8*time.Second, map[string]int{
		"csi-provisioner": 1, "csi-attacher": 1, "ebs-plugin-controller": 1, r.nodePlugin: 1,
	})
	r.s.EC2.SetFaults(chaosFaults(15, r.seed+2))
	defer logFaults(t, r.s.Stack, "deletion")
	kube := r.s.Client
	runChaos(ctx, t, r.chaos, plan, func() error {
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
	})
	t.Logf("kills over; waiting for everything to be gone")
	r.waitEmpty(ctx, t)
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
