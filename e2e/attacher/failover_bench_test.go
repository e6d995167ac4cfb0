//go:build bench

package attacher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/csimock"

	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// standbySettle is how long a new standby runs before the leader is stopped: longer than its longest
// retry interval (5 s with client-go's jitter of 1.2, so up to 11 s), so it has observed the leader's
// renewals at least once more after its first look, as a standby that has been running for a while has.
const standbySettle = 12 * time.Second

// failoverScenario is one way of running two csi-attacher replicas and stopping the leader.
type failoverScenario struct {
	flags  string // for the table
	args   []string
	signal syscall.Signal
}

// failoverRound is what one stop of the leader measured, in seconds after the signal.
type failoverRound struct {
	exited, leaseTaken, firstPublish float64
}

// TestBenchAttacherFailover measures the seconds from stopping the leading csi-attacher (SIGKILL, and
// separately SIGTERM) to the standby acting: its first ControllerPublishVolume call, for a
// VolumeAttachment the old leader had in flight, and the Lease's holder changing to it. It runs with
// upstream's leader-election defaults (lease 15 s, renew 10 s, retry 5 s, no release on exit) and with
// Stowage's (the same durations, ReleaseLeaderElectionOnExit on), ATTACHER_FAILOVER_ROUNDS rounds
// (default 7) each, the four scenarios side by side on one control plane, and prints the medians.
func TestBenchAttacherFailover(t *testing.T) {
	rounds := e2erig.EnvCount(t, "ATTACHER_FAILOVER_ROUNDS", 7)
	upstream := []string{"--leader-election-lease-duration=15s", "--leader-election-renew-deadline=10s",
		"--leader-election-retry-period=5s", "--feature-gates=ReleaseLeaderElectionOnExit=false"}
	scenarios := []failoverScenario{
		{"upstream defaults (lease 15s, renew 10s, retry 5s, no release)", upstream, syscall.SIGKILL},
		{"upstream defaults (lease 15s, renew 10s, retry 5s, no release)", upstream, syscall.SIGTERM},
		{"Stowage defaults (lease 15s, renew 10s, retry 5s, release on exit)", nil, syscall.SIGKILL},
		{"Stowage defaults (lease 15s, renew 10s, retry 5s, release on exit)", nil, syscall.SIGTERM},
	}
	r := startRig(t)
	results := make([][]failoverRound, len(scenarios))
	// All scenarios at once, whatever -parallel is: t.Run may be called from several goroutines.
	var wg sync.WaitGroup
	for i, sc := range scenarios {
		wg.Go(func() {
			t.Run(fmt.Sprintf("%d-%s", i, signalName(sc.signal)), func(t *testing.T) {
				results[i] = runFailover(t, r, i, sc, rounds)
			})
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	fmt.Printf("\ncsi-attacher failover: two replicas, the leader stopped with a ControllerPublish in flight, real kube-apiserver; seconds after the signal, median of %d rounds (min-max)\n", rounds)
	fmt.Printf("%-68s %-8s %18s %18s %26s\n", "leader election", "signal", "leader exited", "lease taken", "standby's first publish")
	for i, sc := range scenarios {
		exited, lease, publish := column(results[i], func(r failoverRound) float64 { return r.exited }),
			column(results[i], func(r failoverRound) float64 { return r.leaseTaken }),
			column(results[i], func(r failoverRound) float64 { return r.firstPublish })
		fmt.Printf("%-68s %-8s %18s %18s %26s\n", sc.flags, signalName(sc.signal), spread(exited, 2), spread(lease, 1), spread(publish, 1))
	}
	fmt.Println("lease taken: first time the Lease names the standby (polled every 100 ms); first publish: the standby's ControllerPublishVolume for the VolumeAttachment the leader had in flight.")
	fmt.Println()
}

// runFailover runs rounds failovers of one scenario with its own driver name (so its own Lease) and node:
// each round a fresh standby starts, a VolumeAttachment is created whose ControllerPublish blocks in the
// leader, the leader is stopped, and the standby's takeover is timed. The standby leads the next round.
func runFailover(t *testing.T, r *rig, index int, sc failoverScenario, rounds int) []failoverRound {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	driver := fmt.Sprintf("failover%d.csi.stowage.io", index)
	node, nodeID := fmt.Sprintf("node-failover%d", index), fmt.Sprintf("mock-failover%d", index)
	lease := "external-attacher-leader-" + strings.ReplaceAll(driver, ".", "-")

	drv, err := csimock.Start(ctx, csimock.Options{Name: driver})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	// A ControllerPublish made before the round's signal is the leader's: it blocks until the round
	// releases it (SIGTERM) or the leader goes away (SIGKILL). One made after the signal is the standby's
	// (a stopping leader starts no new work): its time is recorded and the call succeeds.
	var (
		mu           sync.Mutex
		signaled     bool
		release      chan struct{}
		firstPublish time.Time
	)
	drv.SetBeforeCall(func(ctx context.Context, method string, _ any) error {
		if method != csimock.ControllerPublishVolume {
			return nil
		}
		mu.Lock()
		if signaled {
			if firstPublish.IsZero() {
				firstPublish = time.Now()
			}
			mu.Unlock()
			return nil
		}
		rel := release
		mu.Unlock()
		select {
		case <-rel:
			return status.Error(codes.Aborted, "interrupted by the benchmark")
		case <-ctx.Done():
			return ctx.Err()
		}
	})

	client := r.client
	createNode(t, ctx, client, node, driver, nodeID)
	holder := func(ctx context.Context) string {
		l, err := client.CoordinationV1().Leases(attacherNamespace).Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}

	leader := r.startAttacher(t, fmt.Sprintf("failover%d-0", index), drv.Endpoint(), sc.args...)
	var leaderID string
	e2erig.Eventually(t, ctx, 2*time.Minute, "the first replica to lead", func(ctx context.Context) (bool, error) {
		leaderID = holder(ctx)
		return leaderID != "", nil
	})
	var out []failoverRound
	for round := range rounds {
		standby := r.startAttacher(t, fmt.Sprintf("failover%d-%d", index, round+1), drv.Endpoint(), sc.args...)
		e2erig.Eventually(t, ctx, time.Minute, "the standby to wait for the lease", func(context.Context) (bool, error) {
			log, err := os.ReadFile(standby.LogPath)
			return err == nil && strings.Contains(string(log), "Waiting to become leader"), err
		})
		time.Sleep(standbySettle)

		rel := make(chan struct{})
		mu.Lock()
		signaled, release, firstPublish = false, rel, time.Time{}
		mu.Unlock()
		before := drv.Calls(csimock.ControllerPublishVolume)
		vol := drv.AddVolume(fmt.Sprintf("pv-failover%d-%d", index, round), 1<<30)
		if _, err := client.CoreV1().PersistentVolumes().Create(ctx, csiPV(vol.Name, driver, vol.ID), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		vaName := fmt.Sprintf("va-failover%d-%d", index, round)
		if _, err := client.StorageV1().VolumeAttachments().Create(ctx, directVA(vaName, driver, vol.Name, node), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e2erig.Eventually(t, ctx, time.Minute, "the leader's ControllerPublish", func(context.Context) (bool, error) {
			return drv.Calls(csimock.ControllerPublishVolume) > before, nil
		})

		exitedAt := make(chan time.Time, 1)
		go func(done <-chan struct{}) {
			<-done
			exitedAt <- time.Now()
		}(leader.Done())
		mu.Lock()
		signaled = true
		mu.Unlock()
		stopped := time.Now()
		leader.Signal(sc.signal)
		if sc.signal == syscall.SIGTERM {
			close(rel) // the call in flight returns, so the drain does not wait for --timeout
		}
		var res failoverRound
		var newLeader string
		e2erig.Eventually(t, ctx, 2*time.Minute, "the standby to take the lease", func(ctx context.Context) (bool, error) {
			if h := holder(ctx); h != "" && h != leaderID {
				newLeader = h
				res.leaseTaken = time.Since(stopped).Seconds()
				return true, nil
			}
			return false, nil
		})
		waitCtx, waitCancel := context.WithTimeout(ctx, time.Minute)
		err := leader.Wait(waitCtx)
		waitCancel()
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("leader still running a minute after %s", sc.signal)
		}
		if sc.signal == syscall.SIGTERM && err != nil {
			t.Errorf("leader exit after SIGTERM = %v, want a clean exit", err)
		}
		e2erig.Eventually(t, ctx, 2*time.Minute, "the standby to attach "+vaName, func(ctx context.Context) (bool, error) {
			va, err := client.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
			return err == nil && va.Status.Attached, err
		})
		mu.Lock()
		published := firstPublish
		mu.Unlock()
		if published.IsZero() {
			t.Fatalf("round %d: %s attached without a ControllerPublish by the standby", round, vaName)
		}
		res.exited = (<-exitedAt).Sub(stopped).Seconds()
		res.firstPublish = published.Sub(stopped).Seconds()
		if res.firstPublish < res.leaseTaken-1 {
			// The lease is polled every 100 ms: a publish this much earlier was not the standby's.
			t.Errorf("round %d: a ControllerPublish %.1fs after %s, before the standby took the lease (%.1fs)", round+1, res.firstPublish, sc.signal, res.leaseTaken)
		}
		t.Logf("round %d: %s, leader exited %.2fs, lease taken by %s %.1fs, standby's first publish %.1fs", round+1, sc.signal, res.exited, newLeader, res.leaseTaken, res.firstPublish)
		out = append(out, res)
		leader, leaderID = standby, newLeader
	}
	return out
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
