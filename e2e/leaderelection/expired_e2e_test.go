//go:build e2e

package leaderelection_test

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/shared/leaderelection"
)

// TestE2ELeaderElectionTakesAnExpiredLease leaves a Lease behind as a SIGKILLed leader does, its last renewal
// already older than its duration, and starts a candidate: it takes the Lease at once, judging by the holder's
// renewTime, where client-go's elector would first wait a whole lease duration from its own first look; and a
// candidate that comes while the new leader renews keeps waiting on the watch.
func TestE2ELeaderElectionTakesAnExpiredLease(t *testing.T) {
	top := t
	newClient := startClients(t)
	observer := newClient()
	lockName := leaderelection.LockName("external-attacher-leader-", "expired.csi.stowage.io")
	renewed := metav1.NewMicroTime(time.Now().Add(-leaseDuration - 5*time.Second))
	gone, seconds, transitions := "killed-leader", int32(leaseDuration/time.Second), int32(3)
	if _, err := observer.CoordinationV1().Leases(namespace).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: lockName, Namespace: namespace},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &gone, LeaseDurationSeconds: &seconds, AcquireTime: &renewed,
			RenewTime: &renewed, LeaseTransitions: &transitions},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	started := time.Now()
	a := startCandidate(t, top, newClient(), lockName, "candidate-a")
	var led time.Time
	select {
	case led = <-a.leading:
	case <-time.After(2 * time.Minute):
		t.Fatal("the candidate never took the expired lease")
	}
	// client-go's elector, counting from its own first look, could not lead before started + leaseDuration.
	if wait := led.Sub(started); wait >= leaseDuration {
		t.Errorf("the candidate led %s after it started, not before its own count of the %s lease duration: it did not judge by the holder's renewTime", wait, leaseDuration)
	}
	l := lease(t, observer, lockName)
	if holder(l) != "candidate-a" || l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != transitions+1 {
		t.Errorf("lease held by %q with %v transitions, want candidate-a with %d", holder(l), l.Spec.LeaseTransitions, transitions+1)
	}

	// A second candidate sees a live, renewing leader and waits; it leads only once a lets go.
	b := startCandidate(t, top, newClient(), lockName, "candidate-b")
	waitRenewedSince(t, observer, lockName, "candidate-a", time.Now())
	waitRenewedSince(t, observer, lockName, "candidate-a", time.Now())
	select {
	case <-b.leading:
		t.Fatal("the second candidate led while the first renewed")
	default:
	}
	a.stop(t)
	a.endDrain()
	select {
	case <-b.leading:
	case <-time.After(2 * time.Minute):
		t.Fatal("the second candidate never led after the first released the lease")
	}
	b.stop(t)
	b.endDrain()
}
