//go:build e2e

package attacher

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// failoverCase is how the leader is stopped in a failover test.
type failoverCase struct {
	name string // names the driver, node and volumes
	sig  syscall.Signal
}

var (
	// With SIGTERM the leader drains and releases the lease on its way out.
	failoverTerm = failoverCase{name: "failover-term", sig: syscall.SIGTERM}
	// With SIGKILL the standby waits for the lease to expire.
	failoverKill = failoverCase{name: "failover-kill", sig: syscall.SIGKILL}
)

// failoverVAs is how many VolumeAttachments the leader is working on when it is stopped.
const failoverVAs = 3

// leArgs give a short lease, so the SIGKILL case does not wait long for it to expire.
var leArgs = []string{"--leader-election-lease-duration=8s", "--leader-election-renew-deadline=5s", "--leader-election-retry-period=2s"}

// testFailover runs two replicas, stops the leader while it is in the middle of ControllerPublish calls,
// and checks the standby finishes the work.
func testFailover(t *testing.T, r *rig, fc failoverCase) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := newFixture(t, ctx, r, fc.name)
	lease := "external-attacher-leader-" + strings.ReplaceAll(f.driver, ".", "-")
	release := blockPublish(f.drv)
	for i := range failoverVAs {
		f.volume(fmt.Sprintf("pv-%s-%d", fc.name, i), nil)
	}

	leader := r.startAttacher(t, "leader", f.drv.Endpoint(), leArgs...)
	leaderID := f.waitLeaseHolder(lease, "first replica leads", func(string) bool { return true })
	r.startAttacher(t, "standby", f.drv.Endpoint(), leArgs...)
	for i := range failoverVAs {
		f.attachment(fmt.Sprintf("va-%s-%d", fc.name, i), fmt.Sprintf("pv-%s-%d", fc.name, i), nil)
	}
	e2erig.Eventually(t, ctx, waitTimeout, "leader in ControllerPublish", func(context.Context) (bool, error) {
		return f.drv.Calls(csimock.ControllerPublishVolume) >= 1, nil
	})

	stoppedAt := f.stopLeader(leader, fc.sig, release, lease, leaderID)
	newLeader := f.waitLeaseHolder(lease, "standby leads", func(h string) bool { return h != leaderID })
	t.Logf("%s: standby %s took the lease %.1fs after the leader %s exited (lease duration 8s)", fc.sig, newLeader, time.Since(stoppedAt).Seconds(), leaderID)
	e2erig.Eventually(t, ctx, waitTimeout, "standby attached every VolumeAttachment", func(ctx context.Context) (bool, error) {
		attached, total, err := attachedCount(ctx, f.client, f.driver)
		return err == nil && total == failoverVAs && attached == failoverVAs, err
	})
	for _, v := range f.drv.Volumes() {
		if !slices.Equal(v.PublishedNodes, []string{f.nodeID}) {
			t.Errorf("volume %s published to %v, want [%s]", v.ID, v.PublishedNodes, f.nodeID)
		}
	}
}

// waitLeaseHolder waits until lease has a holder that ok accepts and returns it.
func (f *fixture) waitLeaseHolder(lease, what string, ok func(holder string) bool) string {
	f.t.Helper()
	var holder string
	e2erig.Eventually(f.t, f.ctx, waitTimeout, what, func(ctx context.Context) (bool, error) {
		l, err := f.client.CoordinationV1().Leases(sidecarrig.Namespace).Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, err
		}
		holder = *l.Spec.HolderIdentity
		return holder != "" && ok(holder), nil
	})
	return holder
}

// stopLeader sends sig to the leader and waits for it to exit. After SIGTERM the blocked calls are
// released, so its workers drain, and it must exit cleanly and release the lease; after SIGKILL it must have
// been killed. Then ControllerPublish stops blocking, for the standby. It returns when the leader exited.
func (f *fixture) stopLeader(leader *e2erig.Process, sig syscall.Signal, release chan struct{}, lease, leaderID string) time.Time {
	t := f.t
	t.Helper()
	leader.Signal(sig)
	if sig == syscall.SIGTERM {
		close(release) // the leader's in-flight calls fail, its workers drain, it releases the lease
	}
	waitCtx, waitCancel := context.WithTimeout(f.ctx, time.Minute)
	exitErr := leader.Wait(waitCtx)
	waitCancel()
	stoppedAt := time.Now()
	if sig == syscall.SIGTERM {
		if exitErr != nil {
			t.Errorf("leader exit after SIGTERM = %v, want a clean exit", exitErr)
		}
		l, err := f.client.CoordinationV1().Leases(sidecarrig.Namespace).Get(f.ctx, lease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := l.Spec.HolderIdentity; h != nil && *h == leaderID {
			t.Errorf("lease still held by the stopped leader %s: not released on graceful exit", leaderID)
		}
	} else if exitErr == nil {
		t.Errorf("leader exit after SIGKILL = nil, want killed")
	}
	f.drv.SetBeforeCall(nil)
	return stoppedAt
}

// stormVAs is how many VolumeAttachments a failover storm creates.
const stormVAs = 12

// TestE2EAttacherFailoverMixed runs a Stowage and an upstream csi-attacher (external-attacher from e2e/tools)
// as two replicas of one Deployment, under one Lease, and SIGKILLs the leader in the middle of a storm of
// VolumeAttachments, each way round: the survivor takes the Lease and attaches every VolumeAttachment, each
// volume to its one node, none lost. Stowage's standby watches the Lease, upstream's polls it; both read the
// same record.
func TestE2EAttacherFailoverMixed(t *testing.T) {
	r := startRig(t)
	upstream := sidecarrig.Upstream(t, sidecarrig.Attacher())
	t.Run("UpstreamLeadsStowageStandsBy", func(t *testing.T) { testMixedFailover(t, r, "mixed-up", upstream, r.binary) })
	t.Run("StowageLeadsUpstreamStandsBy", func(t *testing.T) { testMixedFailover(t, r, "mixed-st", r.binary, upstream) })
}

// testMixedFailover starts leaderBin, then standbyBin, creates stormVAs VolumeAttachments whose
// ControllerPublish blocks in the leader, SIGKILLs the leader once it is publishing, and checks the standby
// finishes the storm.
func testMixedFailover(t *testing.T, r *rig, name, leaderBin, standbyBin string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := newFixture(t, ctx, r, name)
	lease := "external-attacher-leader-" + strings.ReplaceAll(f.driver, ".", "-")
	release := blockPublish(f.drv)
	for i := range stormVAs {
		f.volume(fmt.Sprintf("pv-%s-%d", name, i), nil)
	}
	leader := r.startBinary(t, leaderBin, "leader", f.drv.Endpoint(), leArgs...)
	leaderID := f.waitLeaseHolder(lease, "the first replica leads", func(string) bool { return true })
	r.startBinary(t, standbyBin, "standby", f.drv.Endpoint(), leArgs...)
	for i := range stormVAs {
		f.attachment(fmt.Sprintf("va-%s-%d", name, i), fmt.Sprintf("pv-%s-%d", name, i), nil)
	}
	e2erig.Eventually(t, ctx, waitTimeout, "the leader in ControllerPublish", func(context.Context) (bool, error) {
		return f.drv.Calls(csimock.ControllerPublishVolume) >= 1, nil
	})

	stoppedAt := f.stopLeader(leader, syscall.SIGKILL, release, lease, leaderID)
	newLeader := f.waitLeaseHolder(lease, "the standby leads", func(h string) bool { return h != leaderID })
	t.Logf("standby %s took the lease %.1fs after the leader %s was killed (lease duration 8s)", newLeader, time.Since(stoppedAt).Seconds(), leaderID)
	e2erig.Eventually(t, ctx, waitTimeout, "the standby attached every VolumeAttachment", func(ctx context.Context) (bool, error) {
		attached, total, err := attachedCount(ctx, f.client, f.driver)
		return err == nil && total == stormVAs && attached == stormVAs, err
	})
	for _, v := range f.drv.Volumes() {
		if !slices.Equal(v.PublishedNodes, []string{f.nodeID}) {
			t.Errorf("volume %s published to %v, want [%s]", v.ID, v.PublishedNodes, f.nodeID)
		}
	}
	close(release)
}

// TestE2EAttacherDriverRestart kills the CSI driver under csi-attacher while its ControllerPublish is in flight
// and serves it again on the same socket: the attacher, which retries failures only after an hour here,
// attaches the VolumeAttachment as soon as the driver is back, since it follows the driver's restart
// (csiconn.FollowRestarts) and retries the work the restart interrupted, and it keeps running.
func TestE2EAttacherDriverRestart(t *testing.T) {
	r := startRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := newFixture(t, ctx, r, "driver-restart")
	d := e2erig.StartRestartingDriver(t, ctx, csimock.Options{Name: f.driver})
	f.drv = d.Driver
	vol, pv := f.volume("pv-driver-restart", nil)
	d.Hold(csimock.ControllerPublishVolume)
	attacher := r.startAttacher(t, "attacher", d.Endpoint(), e2erig.HourBackoff...)
	f.attachment("va-driver-restart", pv.Name, nil)

	second, back := d.KillDuring(t, csimock.ControllerPublishVolume, vol)
	f.drv = second
	f.waitAttached("va-driver-restart")
	t.Logf("attached %.2fs after the driver was back (backoff 1h)", time.Since(back).Seconds())
	if n := second.CallsFor(csimock.ControllerPublishVolume, vol.ID); n != 1 {
		t.Errorf("ControllerPublishVolume calls on the restarted driver = %d, want 1", n)
	}
	e2erig.CheckFollowed(t, attacher)
}
