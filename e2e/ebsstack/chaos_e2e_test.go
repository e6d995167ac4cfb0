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

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

const (
	// chaosSeedEnv replays a run: the seed fixes the kill plan, the restart back-offs and the creation order
	// (the emulator's faults draw from their own source, so they differ between replays).
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

// chaosFaults throttle, fail, drop or slow the mutating EC2 calls of a phase; the SDK, ebs-plugin and
// the sidecars retry. Most of a phase's calls come after its kills (a killed sidecar's successor waits out
// the Lease first), so the faults stay on until the phase has converged, and budget bounds them instead:
// after that many failed calls EC2 answers again (only slowly), so the phase converges.
func chaosFaults(budget int) ec2sim.Faults {
	return ec2sim.Faults{
		Actions: []string{"CreateVolume", "DeleteVolume", "AttachVolume", "DetachVolume", "CreateTags",
			"ModifyVolume", "CreateSnapshot", "DeleteSnapshot"},
		ThrottleRate: 0.2, InternalErrorRate: 0.15, DropRate: 0.05, Latency: 30 * time.Millisecond, Budget: budget,
	}
}

// TestE2EEBSChaos provisions, attaches and stages a batch of volumes (two more claims are deleted while
// being provisioned), snapshots three of them, and deletes everything, while the EC2 emulator throttles,
// fails, drops and slows mutating calls and csi-provisioner, csi-attacher, ebs-plugin's controller and a node
// plugin are SIGKILLed and restarted at random moments. Throughout, no EBS volume may be attached to two
// instances or have two attached VolumeAttachments; after provisioning every Pod runs with its volume
// attached to exactly its node and EC2 holds no other volume; each snapshot exists once; after deletion
// nothing is left: no claim, PV, VolumeAttachment, EBS volume, attachment or snapshot, loop device or mount,
// no panic in any log, and no process after Stop. The test logs its seed; STOWAGE_CHAOS_SEED=<seed> replays
// the kill plan.
func TestE2EEBSChaos(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(chaosSeedEnv); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", chaosSeedEnv, v, err)
		}
	}
	t.Logf("chaos seed %d (replay with %s=%d)", seed, chaosSeedEnv, seed)
	// The chaos goroutine draws its back-offs from a source of its own, so the plan and the work's draws
	// do not depend on goroutine timing.
	rng := rand.New(rand.NewPCG(seed, 1))

	// Under go test's default 10-minute limit, whose panic would skip the cleanups and leave mounts.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := Start(ctx, Options{TimeScale: testTimeScale, Dir: dir, Progress: func(f string, a ...any) { t.Logf(f, a...) }})
	if err != nil {
		t.Fatalf("start stack: %v", err)
	}
	stopped := false
	var chaos *Chaos
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if t.Failed() {
			t.Logf("seed %d; chaos events:\n%s\nlogs:\n%s", seed, chaos.Events(), s.LogTails(60))
		}
		if keep := os.Getenv(chaosLogsEnv); keep != "" {
			out, err := exec.Command("cp", "-r", filepath.Join(dir, "logs"), keep).CombinedOutput()
			t.Logf("copied the logs to %s: %v %s", keep, err, out)
		}
		if err := s.Stop(); err != nil {
			t.Errorf("stop stack: %v", err)
		}
	}
	t.Cleanup(stop)
	chaos = NewChaos(s, rand.New(rand.NewPCG(seed, 2)), t.Logf)
	superviseCtx, stopSupervising := context.WithCancel(ctx)
	supervised := make(chan error, 1)
	go func() { supervised <- chaos.Supervise(superviseCtx) }()
	endSupervision := sync.OnceValue(func() error {
		stopSupervising()
		return <-supervised
	})
	// Cleanups run last-in first-out: supervision (and its restarts) ends before the stack stops.
	t.Cleanup(func() { _ = endSupervision() })
	watch := startWatch(ctx, s)
	t.Cleanup(watch.stop)

	kube := s.Client
	if _, err := kube.StorageV1().StorageClasses().Create(ctx, filesystemClass("stowage-ext4", "ext4"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Phase 1: provision, attach and stage under faults and kills.
	nodePlugin := "ebs-plugin-" + s.NodeOrder[rng.IntN(len(s.NodeOrder))]
	plan := PlanKills(rng, 500*time.Millisecond, 12*time.Second, map[string]int{
		"csi-provisioner": 2, "csi-attacher": 2, "ebs-plugin-controller": 2, nodePlugin: 1,
	})
	claimNode := map[string]string{}
	s.EC2.SetFaults(chaosFaults(20))
	runChaos(ctx, t, chaos, plan, func() error {
		order := rng.Perm(chaosClaims + chaosAbandoned)
		for _, i := range order {
			time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
			node := s.NodeOrder[i%len(s.NodeOrder)]
			if i >= chaosClaims {
				// Abandoned: the claim is deleted while it is being provisioned, before any Pod uses it.
				name := fmt.Sprintf("abandoned-%d", i-chaosClaims)
				if _, err := kube.CoreV1().PersistentVolumeClaims(Namespace).Create(ctx, Claim(name, "stowage-ext4", "1Gi", node, false), metav1.CreateOptions{}); err != nil {
					return err
				}
				after := time.Duration(500+rng.IntN(3000)) * time.Millisecond
				go func() {
					time.Sleep(after)
					_ = kube.CoreV1().PersistentVolumeClaims(Namespace).Delete(ctx, name, metav1.DeleteOptions{})
				}()
				continue
			}
			claim := fmt.Sprintf("chaos-%d", i)
			claimNode[claim] = node
			if _, err := kube.CoreV1().PersistentVolumeClaims(Namespace).Create(ctx, Claim(claim, "stowage-ext4", "1Gi", node, false), metav1.CreateOptions{}); err != nil {
				return err
			}
			if _, err := kube.CoreV1().Pods(Namespace).Create(ctx, Pod("pod-"+claim, node, claim, false), metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("phase 1 kills over; waiting for every Pod to run")
	volumes := checkRunning(ctx, t, s, claimNode)
	logFaults(t, s, "provisioning")
	if t.Failed() {
		t.FailNow()
	}

	// Snapshots of three volumes, created and deleted while the controller is killed and EC2 misbehaves.
	plan = PlanKills(rng, 200*time.Millisecond, 3*time.Second, map[string]int{"ebs-plugin-controller": 2})
	s.EC2.SetFaults(chaosFaults(6))
	runChaos(ctx, t, chaos, plan, func() error {
		snapCtx, cancel := context.WithTimeout(ctx, chaosConverge)
		defer cancel()
		return chaosSnapshots(snapCtx, s, snapshotVolumes(t, volumes, 3))
	})
	logFaults(t, s, "snapshots")
	t.Logf("snapshots under chaos: one EBS snapshot per volume, all deleted")

	// Phase 2: delete everything under faults and kills.
	plan = PlanKills(rng, 300*time.Millisecond, 8*time.Second, map[string]int{
		"csi-provisioner": 1, "csi-attacher": 1, "ebs-plugin-controller": 1, nodePlugin: 1,
	})
	s.EC2.SetFaults(chaosFaults(15))
	runChaos(ctx, t, chaos, plan, func() error {
		for _, claim := range slices.Sorted(maps.Keys(claimNode)) {
			if err := kube.CoreV1().Pods(Namespace).Delete(ctx, "pod-"+claim, metav1.DeleteOptions{}); err != nil {
				return err
			}
			if err := kube.CoreV1().PersistentVolumeClaims(Namespace).Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
				return err
			}
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		}
		return nil
	})
	t.Logf("phase 2 kills over; waiting for everything to be gone")
	checkEmpty(ctx, t, s, dir)
	logFaults(t, s, "deletion")

	if err := endSupervision(); err != nil {
		t.Errorf("supervision: %v", err)
	}
	watch.stop()
	watch.report(t)
	t.Logf("chaos events:\n%s", chaos.Events())
	if exits := chaos.OwnExits(); len(exits) > 0 {
		t.Logf("processes that ended on their own (restarted): %v", exits)
	}
	checkLogs(t, s)
	injected, err := faultCounts(ctx, s)
	if err != nil {
		t.Errorf("read the emulator's metrics: %v", err)
	} else {
		t.Logf("EC2 answers by code: %v", injected)
		if injected["RequestLimitExceeded"]+injected["InternalError"]+injected["Dropped"] == 0 {
			t.Errorf("the emulator injected no fault: the chaos did not happen")
		}
	}

	stopLeavesNothing(t, s, dir, stop)
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

// checkRunning waits until every claim is Bound and its Pod Running, and checks that each volume is in its
// node's zone, attached in EC2 to exactly its node's instance, with one attached VolumeAttachment to that
// node and none elsewhere, staged and published as ext4, and that EC2 holds no other volume. It returns the
// claims' volumes: EBS volume ID -> node.
func checkRunning(ctx context.Context, t *testing.T, s *Stack, claimNode map[string]string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, chaosConverge)
	defer cancel()
	kube := s.Client
	want := map[string]string{} // volume ID -> node
	for _, claim := range slices.Sorted(maps.Keys(claimNode)) {
		node := claimNode[claim]
		var pod *v1.Pod
		err := poll(ctx, "Pod pod-"+claim+" Running", func(ctx context.Context) (bool, string, error) {
			var err error
			if pod, err = kube.CoreV1().Pods(Namespace).Get(ctx, "pod-"+claim, metav1.GetOptions{}); err != nil {
				return false, "", err
			}
			return pod.Status.Phase == v1.PodRunning, string(pod.Status.Phase), nil
		})
		if err != nil {
			t.Errorf("claim %s on %s: %v", claim, node, err)
			continue
		}
		c, err := kube.CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, claim, metav1.GetOptions{})
		if err != nil || c.Status.Phase != v1.ClaimBound {
			t.Errorf("claim %s: %v (%v), want Bound", claim, c.Status.Phase, err)
			continue
		}
		pv, err := kube.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
		if err != nil || pv.Spec.CSI == nil {
			t.Errorf("PV %s of %s: %v", c.Spec.VolumeName, claim, err)
			continue
		}
		volID := pv.Spec.CSI.VolumeHandle
		want[volID] = node
		spec := s.Nodes[node].Spec
		err = poll(ctx, volID+" attached to "+node+" only", func(ctx context.Context) (bool, string, error) {
			st := s.EC2.State()
			var atts []string
			ok := false
			for _, a := range st.Attachments {
				if a.VolumeID == volID {
					atts = append(atts, a.InstanceID+"/"+a.State)
					ok = a.InstanceID == spec.InstanceID && a.State == "attached" && a.LoopDevice != ""
				}
			}
			for _, v := range st.Volumes {
				if v.ID == volID && v.Zone != spec.Zone {
					return false, "", fmt.Errorf("%s is in %s, node %s in %s", volID, v.Zone, node, spec.Zone)
				}
			}
			return ok && len(atts) == 1, fmt.Sprintf("EC2 attachments %v", atts), nil
		})
		if err != nil {
			t.Errorf("claim %s: %v", claim, err)
		}
		vas, err := kube.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, va := range vas.Items {
			if va.Spec.Source.PersistentVolumeName == nil || *va.Spec.Source.PersistentVolumeName != pv.Name {
				continue
			}
			if va.Spec.NodeName != node || !va.Status.Attached || va.Name != AttachmentName(volID, node) {
				t.Errorf("VolumeAttachment %s of %s: node %s, attached %v; want only %s on %s, attached",
					va.Name, pv.Name, va.Spec.NodeName, va.Status.Attached, AttachmentName(volID, node), node)
			}
		}
		k := s.Nodes[node].Kubelet
		if err := checkFSType("staging path of "+volID, k.StagingPath(volID), "ext4"); err != nil {
			t.Errorf("claim %s: %v", claim, err)
		}
		if err := checkFSType("publish path of "+claim, k.PublishPath(string(pod.UID), pv.Name), "ext4"); err != nil {
			t.Errorf("claim %s: %v", claim, err)
		}
	}
	// The abandoned claims' volumes (if any was made) and every retried CreateVolume must not have left a
	// volume beside the ones in use.
	err := poll(ctx, "EC2 volumes are exactly the claims'", func(ctx context.Context) (bool, string, error) {
		var extra []string
		st := s.EC2.State()
		for _, v := range st.Volumes {
			if _, ok := want[v.ID]; !ok {
				extra = append(extra, fmt.Sprintf("%s(%s, %s)", v.ID, v.State, v.Tags["CSIVolumeName"]))
			}
		}
		claims, err := kube.CoreV1().PersistentVolumeClaims(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(extra) == 0 && len(claims.Items) == len(claimNode) && len(st.Volumes) == len(want),
			fmt.Sprintf("%d claims, extra volumes %v", len(claims.Items), extra), nil
	})
	if err != nil {
		t.Errorf("after provisioning: %v", err)
	}
	return want
}

// checkEmpty waits until no Pod, claim, PV or VolumeAttachment is left and EC2 holds no volume,
// attachment or snapshot, then checks that no loop device or mount is left under dir.
func checkEmpty(ctx context.Context, t *testing.T, s *Stack, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, chaosConverge)
	defer cancel()
	kube := s.Client
	err := poll(ctx, "everything deleted", func(ctx context.Context) (bool, string, error) {
		pods, err := kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		claims, err := kube.CoreV1().PersistentVolumeClaims(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		vas, err := kube.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		st := s.EC2.State()
		left := objectNames(claims.Items, func(c v1.PersistentVolumeClaim) string {
			if c.DeletionTimestamp != nil {
				return "claim " + c.Name + " (Terminating)"
			}
			return "claim " + c.Name
		})
		left = append(left, objectNames(pvs.Items, func(pv v1.PersistentVolume) string {
			return "PV " + pv.Name + " (" + string(pv.Status.Phase) + ")"
		})...)
		for _, v := range st.Volumes {
			left = append(left, "EBS "+v.ID+" ("+v.State+")")
		}
		for _, a := range st.Attachments {
			left = append(left, "attachment "+a.VolumeID+"@"+a.InstanceID+" ("+a.State+")")
		}
		for _, sn := range st.Snapshots {
			left = append(left, "snapshot "+sn.ID)
		}
		done := len(pods.Items) == 0 && len(vas.Items) == 0 && len(left) == 0
		return done, fmt.Sprintf("%d Pods, %d VolumeAttachments, %s", len(pods.Items), len(vas.Items), strings.Join(left, ", ")), nil
	})
	if err != nil {
		t.Errorf("after deletion: %v", err)
		return
	}
	if loops := LoopDevicesUnder(dir); len(loops) > 0 {
		t.Errorf("loop devices left after deletion: %v", loops)
	}
	for _, name := range s.NodeOrder {
		if mounts, err := MountsUnder(s.Nodes[name].Kubelet.RootDir()); err != nil || len(mounts) > 0 {
			t.Errorf("mounts left on %s after deletion: %v (%v)", name, mounts, err)
		}
	}
}
