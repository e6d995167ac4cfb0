//go:build bench

package attacher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// standbySettle is how long a new standby runs before the leader is stopped: longer than its longest
// retry interval (5 s with client-go's jitter of 1.2, so up to 11 s), so it has observed the leader's
// renewals at least once more after its first look, as a standby that has been running for a while has.
const standbySettle = 12 * time.Second

// failoverScenario is one way of running two csi-attacher replicas and stopping the leader.
type failoverScenario struct {
	name     string // for the table
	upstream bool   // both replicas are upstream's csi-attacher, else Stowage's
	args     []string
	signal   syscall.Signal
}

// binary is the scenario's csi-attacher and the log line its standby writes once it waits for the Lease.
func (sc failoverScenario) binary(r *rig, upstream string) (path, waiting string) {
	if sc.upstream {
		return upstream, "attempting to acquire leader lease" // client-go's, in either case
	}
	return r.binary, "Waiting to become leader"
}

// failoverRound is what one stop of the leader measured, in seconds after the signal, and the standby's first
// publish in seconds after the leader's last renewal of the Lease (its renewTime when it was stopped).
type failoverRound struct {
	exited, leaseTaken, firstPublish, afterRenewal float64
}

// TestBenchAttacherFailover measures the seconds from stopping the leading csi-attacher (SIGKILL, and
// separately SIGTERM) to the standby acting: its first ControllerPublishVolume call, for a
// VolumeAttachment the old leader had in flight, and the Lease's holder changing to it. Side by side on one
// control plane: a pair of the real upstream csi-attacher (external-attacher from e2e/tools) at its defaults
// (lease 15 s, renew 10 s, retry 5 s, no release on exit) and a pair of Stowage's at its own (the same
// durations, release on exit, a standby that watches the Lease), ATTACHER_FAILOVER_ROUNDS rounds (default 7)
// each; it prints the medians. Targets: SIGKILL, first publish <= lease duration + 1 s after the leader's
// last renewal; SIGTERM, <= 3 s after the signal.
func TestBenchAttacherFailover(t *testing.T) {
	rounds := e2erig.EnvCount(t, "ATTACHER_FAILOVER_ROUNDS", 7)
	scenarios := []failoverScenario{
		{"upstream external-attacher, its defaults (lease 15s, renew 10s, retry 5s, no release)", true, nil, syscall.SIGKILL},
		{"upstream external-attacher, its defaults (lease 15s, renew 10s, retry 5s, no release)", true, nil, syscall.SIGTERM},
		{"Stowage csi-attacher, its defaults (lease 15s, renew 10s, retry 5s, release, watch)", false, nil, syscall.SIGKILL},
		{"Stowage csi-attacher, its defaults (lease 15s, renew 10s, retry 5s, release, watch)", false, nil, syscall.SIGTERM},
	}
	r := startRig(t)
	upstream := sidecarrig.Upstream(t, sidecarrig.Attacher())
	upstream = ownHostname(t, upstream)
	results := make([][]failoverRound, len(scenarios))
	// All scenarios at once, whatever -parallel is: t.Run may be called from several goroutines.
	var wg sync.WaitGroup
	for i, sc := range scenarios {
		wg.Go(func() {
			t.Run(fmt.Sprintf("%d-%s", i, signalName(sc.signal)), func(t *testing.T) {
				results[i] = runFailover(t, r, upstream, i, sc, rounds)
			})
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	fmt.Printf("\ncsi-attacher failover: two replicas, the leader stopped with a ControllerPublish in flight, real kube-apiserver; median of %d rounds (min-max), seconds\n", rounds)
	fmt.Printf("%-86s %-8s %16s %16s %22s %26s\n", "replicas", "signal", "leader exited", "lease taken", "first publish", "first publish after")
	fmt.Printf("%-86s %-8s %16s %16s %22s %26s\n", "", "", "after signal", "after signal", "after signal", "leader's last renewal")
	for i, sc := range scenarios {
		pick := func(f func(failoverRound) float64) string { return spread(column(results[i], f), 1) }
		fmt.Printf("%-86s %-8s %16s %16s %22s %26s\n", sc.name, signalName(sc.signal),
			spread(column(results[i], func(r failoverRound) float64 { return r.exited }), 2),
			pick(func(r failoverRound) float64 { return r.leaseTaken }),
			pick(func(r failoverRound) float64 { return r.firstPublish }),
			pick(func(r failoverRound) float64 { return r.afterRenewal }))
	}
	fmt.Println("lease taken: first time the Lease names the standby (polled every 100 ms); first publish: the standby's ControllerPublishVolume for the VolumeAttachment the leader had in flight; last renewal: the Lease's renewTime as the stopped leader left it.")
	fmt.Println("targets: SIGKILL, first publish <= 16 s (lease 15 s + 1 s) after the last renewal; SIGTERM, <= 3 s after the signal.")
	fmt.Println()
}

// ownHostname returns a wrapper that runs bin with a hostname of its own (a UTS namespace, as each pod has):
// upstream's leader election identity is the bare hostname, so two upstream replicas on this one machine would
// otherwise both hold the Lease. The wrapper execs bin in place, so signals reach it.
func ownHostname(t *testing.T, bin string) string {
	t.Helper()
	wrapper := filepath.Join(t.TempDir(), "csi-attacher-own-hostname")
	script := "#!/bin/sh\nexec unshare --uts sh -c 'hostname \"replica-$$\" && exec \"$0\" \"$@\"' '" + bin + "' \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper
}

// runFailover runs rounds failovers of one scenario with its own driver name (so its own Lease) and node:
// each round a fresh standby starts, a VolumeAttachment is created whose ControllerPublish blocks in the
// leader, the leader is stopped, and the standby's takeover is timed. The standby leads the next round.
func runFailover(t *testing.T, r *rig, upstream string, index int, sc failoverScenario, rounds int) []failoverRound {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	driver := fmt.Sprintf("failover%d.csi.stowage.io", index)
	drv, err := csimock.Start(ctx, csimock.Options{Name: driver})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	bin, waiting := sc.binary(r, upstream)
	fb := &failoverBench{t: t, ctx: ctx, r: r, drv: drv, gate: &publishGate{}, index: index, sc: sc, driver: driver, bin: bin, waiting: waiting,
		node: fmt.Sprintf("node-failover%d", index), lease: "external-attacher-leader-" + strings.ReplaceAll(driver, ".", "-")}
	drv.SetBeforeCall(fb.gate.before)
	createNode(t, ctx, r.Client, fb.node, driver, fmt.Sprintf("mock-failover%d", index))

	leader := r.startBinary(t, bin, fmt.Sprintf("failover%d-0", index), drv.Endpoint(), sc.args...)
	var leaderID string
	e2erig.Eventually(t, ctx, 2*time.Minute, "the first replica to lead", func(ctx context.Context) (bool, error) {
		leaderID = fb.holder(ctx)
		return leaderID != "", nil
	})
	var out []failoverRound
	for round := range rounds {
		res, standby, newLeader := fb.round(round, leader, leaderID)
		out = append(out, res)
		leader, leaderID = standby, newLeader
	}
	return out
}

// publishGate tells the leader's ControllerPublish calls from the standby's. A call made before the round's
// signal is the leader's: it blocks until the round releases it (SIGTERM) or the leader goes away (SIGKILL).
// One made after the signal is the standby's (a stopping leader starts no new work): its time is recorded
// and the call succeeds.
type publishGate struct {
	mu           sync.Mutex
	signaled     bool
	release      chan struct{}
	firstPublish time.Time
}

func (g *publishGate) before(ctx context.Context, method string, _ any) error {
	if method != csimock.ControllerPublishVolume {
		return nil
	}
	g.mu.Lock()
	if g.signaled {
		if g.firstPublish.IsZero() {
			g.firstPublish = time.Now()
		}
		g.mu.Unlock()
		return nil
	}
	rel := g.release
	g.mu.Unlock()
	select {
	case <-rel:
		return status.Error(codes.Aborted, "interrupted by the benchmark")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// arm starts a round: calls block until the returned channel is closed.
func (g *publishGate) arm() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.signaled, g.release, g.firstPublish = false, make(chan struct{}), time.Time{}
	return g.release
}

// signal marks the leader as signaled: later calls are the standby's.
func (g *publishGate) signal() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.signaled = true
}

// first is when the standby's first call came, zero if none did.
func (g *publishGate) first() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.firstPublish
}

// failoverBench is one scenario's driver, node and Lease.
type failoverBench struct {
	t                   *testing.T
	ctx                 context.Context
	r                   *rig
	drv                 *csimock.Driver
	gate                *publishGate
	index               int
	sc                  failoverScenario
	driver, node, lease string
	bin, waiting        string // the csi-attacher both replicas run, and its standby's waiting log line
}

// holder is the Lease's holder, "" when there is none or it cannot be read.
func (fb *failoverBench) holder(ctx context.Context) string {
	l, err := fb.r.Client.CoordinationV1().Leases(sidecarrig.Namespace).Get(ctx, fb.lease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// round starts a standby, gives the leader a VolumeAttachment to work on, stops it and times the standby's
// takeover. It returns the measures, the standby and its identity.
func (fb *failoverBench) round(round int, leader *e2erig.Process, leaderID string) (failoverRound, *e2erig.Process, string) {
	t, ctx := fb.t, fb.ctx
	standby := fb.r.startBinary(t, fb.bin, fmt.Sprintf("failover%d-%d", fb.index, round+1), fb.drv.Endpoint(), fb.sc.args...)
	e2erig.Eventually(t, ctx, time.Minute, "the standby to wait for the lease", func(context.Context) (bool, error) {
		log, err := os.ReadFile(standby.LogPath)
		return err == nil && strings.Contains(strings.ToLower(string(log)), strings.ToLower(fb.waiting)), err
	})
	time.Sleep(standbySettle)

	rel := fb.gate.arm()
	vaName := fb.leaderAttaching(round)
	exitedAt := make(chan time.Time, 1)
	go func(done <-chan struct{}) {
		<-done
		exitedAt <- time.Now()
	}(leader.Done())
	fb.gate.signal()
	stopped := time.Now()
	leader.Signal(fb.sc.signal)
	if fb.sc.signal == syscall.SIGTERM {
		close(rel) // the call in flight returns, so the drain does not wait for --timeout
	}
	var res failoverRound
	var newLeader string
	var lastRenewal time.Time
	e2erig.Eventually(t, ctx, 2*time.Minute, "the standby to take the lease", func(ctx context.Context) (bool, error) {
		l, err := fb.r.Client.CoordinationV1().Leases(sidecarrig.Namespace).Get(ctx, fb.lease, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		h := ""
		if l.Spec.HolderIdentity != nil {
			h = *l.Spec.HolderIdentity
		}
		if h == leaderID && l.Spec.RenewTime != nil {
			lastRenewal = l.Spec.RenewTime.Time // the stopped leader's: it renews no more
		}
		if h != "" && h != leaderID {
			newLeader = h
			res.leaseTaken = time.Since(stopped).Seconds()
			return true, nil
		}
		return false, nil
	})
	fb.waitLeaderExit(leader)
	e2erig.Eventually(t, ctx, 2*time.Minute, "the standby to attach "+vaName, func(ctx context.Context) (bool, error) {
		va, err := fb.r.Client.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
		return err == nil && va.Status.Attached, err
	})
	published := fb.gate.first()
	if published.IsZero() {
		t.Fatalf("round %d: %s attached without a ControllerPublish by the standby", round, vaName)
	}
	res.exited = (<-exitedAt).Sub(stopped).Seconds()
	res.firstPublish = published.Sub(stopped).Seconds()
	if !lastRenewal.IsZero() {
		res.afterRenewal = published.Sub(lastRenewal).Seconds()
	}
	if res.firstPublish < res.leaseTaken-1 {
		// The lease is polled every 100 ms: a publish this much earlier was not the standby's.
		t.Errorf("round %d: a ControllerPublish %.1fs after %s, before the standby took the lease (%.1fs)", round+1, res.firstPublish, fb.sc.signal, res.leaseTaken)
	}
	t.Logf("round %d: %s, leader exited %.2fs, lease taken by %s %.1fs, standby's first publish %.1fs (%.1fs after the last renewal)", round+1, fb.sc.signal, res.exited, newLeader, res.leaseTaken, res.firstPublish, res.afterRenewal)
	return res, standby, newLeader
}

// leaderAttaching creates the round's volume and VolumeAttachment and waits until the leader's
// ControllerPublish for it is in flight. It returns the VolumeAttachment's name.
func (fb *failoverBench) leaderAttaching(round int) string {
	t, ctx, client := fb.t, fb.ctx, fb.r.Client
	before := fb.drv.Calls(csimock.ControllerPublishVolume)
	vol := fb.drv.AddVolume(fmt.Sprintf("pv-failover%d-%d", fb.index, round), 1<<30)
	if _, err := client.CoreV1().PersistentVolumes().Create(ctx, csiPV(vol.Name, fb.driver, vol.ID), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vaName := fmt.Sprintf("va-failover%d-%d", fb.index, round)
	if _, err := client.StorageV1().VolumeAttachments().Create(ctx, directVA(vaName, fb.driver, vol.Name, fb.node), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e2erig.Eventually(t, ctx, time.Minute, "the leader's ControllerPublish", func(context.Context) (bool, error) {
		return fb.drv.Calls(csimock.ControllerPublishVolume) > before, nil
	})
	return vaName
}

// waitLeaderExit waits up to a minute for the stopped leader; after SIGTERM Stowage's must exit cleanly.
func (fb *failoverBench) waitLeaderExit(leader *e2erig.Process) {
	waitCtx, waitCancel := context.WithTimeout(fb.ctx, time.Minute)
	err := leader.Wait(waitCtx)
	waitCancel()
	if errors.Is(err, context.DeadlineExceeded) {
		fb.t.Fatalf("leader still running a minute after %s", fb.sc.signal)
	}
	// Upstream's attacher handles no SIGTERM (without ReleaseLeaderElectionOnExit): the signal ends it.
	if fb.sc.signal == syscall.SIGTERM && !fb.sc.upstream && err != nil {
		fb.t.Errorf("leader exit after SIGTERM = %v, want a clean exit", err)
	}
}

// column picks one measure out of every round.
func column(rounds []failoverRound, pick func(failoverRound) float64) []float64 {
	out := make([]float64, 0, len(rounds))
	for _, r := range rounds {
		out = append(out, pick(r))
	}
	return out
}

// spread formats the median (the upper middle one of an even number) and the range of values, in seconds
// with the given number of decimals.
func spread(values []float64, decimals int) string {
	if len(values) == 0 {
		return "-"
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	return fmt.Sprintf("%.*f (%.*f-%.*f)", decimals, sorted[len(sorted)/2], decimals, sorted[0], decimals, sorted[len(sorted)-1])
}

func signalName(sig syscall.Signal) string {
	if sig == syscall.SIGKILL {
		return "SIGKILL"
	}
	return "SIGTERM"
}

// TestBenchAttacherDriverRestart measures the seconds from a restarted CSI driver serving its socket again to
// the first ControllerPublishVolume it answers for the VolumeAttachment whose call the restart interrupted,
// for Stowage's csi-attacher (which follows the restart and retries that work at once) and upstream's (which
// exits when it notices the lost connection; here restarted the moment it exits, as a kubelet's first restart
// would be), side by side, ATTACHER_DRIVER_RESTART_ROUNDS rounds (default 7) each. Target: <= 2 s.
func TestBenchAttacherDriverRestart(t *testing.T) {
	rounds := e2erig.EnvCount(t, "ATTACHER_DRIVER_RESTART_ROUNDS", 7)
	r := startRig(t)
	upstream := sidecarrig.Upstream(t, sidecarrig.Attacher())
	attachers := []struct{ name, bin string }{
		{"upstream external-attacher (exits, restarted at once)", upstream},
		{"Stowage csi-attacher (follows the restart)", r.binary},
	}
	results := make([][]float64, len(attachers))
	var wg sync.WaitGroup
	for i, a := range attachers {
		wg.Go(func() {
			t.Run(fmt.Sprintf("%d", i), func(t *testing.T) { results[i] = runDriverRestarts(t, r, i, a.bin, rounds) })
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	fmt.Printf("\ncsi-attacher and a restarted CSI driver: the driver killed with a ControllerPublish in flight and served again on its socket; median of %d rounds (min-max)\n", rounds)
	fmt.Printf("%-56s %44s\n", "attacher", "first publish after the socket is back, s")
	for i, a := range attachers {
		fmt.Printf("%-56s %44s\n", a.name, spread(results[i], 2))
	}
	fmt.Println("target: <= 2 s.")
	fmt.Println()
}

// runDriverRestarts runs rounds driver restarts under one attacher with its own driver, node and socket.
func runDriverRestarts(t *testing.T, r *rig, index int, bin string, rounds int) []float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	driver := fmt.Sprintf("restart%d.csi.stowage.io", index)
	node, nodeID := fmt.Sprintf("node-restart%d", index), fmt.Sprintf("mock-restart%d", index)
	dir, err := os.MkdirTemp("", "drvrestart")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	createNode(t, ctx, r.Client, node, driver, nodeID)
	var volumes []string // every round's volume, in order: a restarted driver is given them again, same IDs
	serve := func() *csimock.Driver {
		drv, err := csimock.Start(ctx, csimock.Options{Name: driver, SocketDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(drv.Stop)
		for _, v := range volumes {
			drv.AddVolume(v, 1<<30)
		}
		return drv
	}
	drv := serve()
	start := func(n int) *e2erig.Process {
		return r.startBinary(t, bin, fmt.Sprintf("restart%d-%d", index, n), drv.Endpoint())
	}
	attacher, starts := start(0), 1
	lease := "external-attacher-leader-" + strings.ReplaceAll(driver, ".", "-")
	e2erig.Eventually(t, ctx, 2*time.Minute, "the attacher to lead", func(ctx context.Context) (bool, error) {
		l, err := r.Client.CoordinationV1().Leases(sidecarrig.Namespace).Get(ctx, lease, metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})

	var out []float64
	for round := range rounds {
		name := fmt.Sprintf("restart%d-%d", index, round)
		volumes = append(volumes, name)
		vol := drv.AddVolume(name, 1<<30)
		release := blockPublish(drv)
		before := drv.Calls(csimock.ControllerPublishVolume)
		if _, err := r.Client.CoreV1().PersistentVolumes().Create(ctx, csiPV(name, driver, vol.ID), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Client.StorageV1().VolumeAttachments().Create(ctx, directVA(name, driver, name, node), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e2erig.Eventually(t, ctx, time.Minute, "the attacher's ControllerPublish", func(context.Context) (bool, error) {
			return drv.Calls(csimock.ControllerPublishVolume) > before, nil
		})
		drv.Stop()
		close(release)
		drv = serve()
		back := time.Now()
		published := make(chan time.Time, 1)
		drv.SetBeforeCall(func(_ context.Context, method string, req any) error {
			if p, ok := req.(*csi.ControllerPublishVolumeRequest); ok && method == csimock.ControllerPublishVolume && p.GetVolumeId() == vol.ID {
				select {
				case published <- time.Now():
				default:
				}
			}
			return nil
		})
		var at time.Time
		for at.IsZero() {
			select {
			case at = <-published:
			case <-attacher.Done():
				// Upstream's exit on the lost connection; restart it as a kubelet would.
				attacher, starts = start(starts), starts+1
			case <-ctx.Done():
				t.Fatalf("round %d: no ControllerPublish for %s after the driver came back", round+1, name)
			}
		}
		out = append(out, at.Sub(back).Seconds())
		e2erig.Eventually(t, ctx, time.Minute, "the attachment of "+name, func(ctx context.Context) (bool, error) {
			va, err := r.Client.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
			return err == nil && va.Status.Attached, err
		})
		t.Logf("round %d: first publish %.2fs after the driver was back (attacher processes so far: %d)", round+1, at.Sub(back).Seconds(), starts)
	}
	return out
}
