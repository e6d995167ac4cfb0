//go:build e2e

// Package leaderelection_test runs shared/leaderelection against a real kube-apiserver: two candidates, the
// leader exits gracefully and releases the Lease, and the standby takes over before the Lease would have
// expired on its own.
package leaderelection_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/cluster/clustertest"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/shared/httpserver"
	"github.com/stowage-csi/stowage/shared/kubeclient"
	"github.com/stowage-csi/stowage/shared/leaderelection"
	"github.com/stowage-csi/stowage/shared/metrics"
)

const (
	namespace = "default"
	// Long enough that "took over before the lease expired" cannot be luck of timing: with a 1 s retry
	// period a released lease is taken within about a second, an unreleased one only after 20 s.
	leaseDuration = 20 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = time.Second
)

type candidate struct {
	id       string
	http     *httpserver.Server
	cancel   context.CancelFunc
	leading  chan time.Time // receives when work starts
	draining chan time.Time // receives when work has seen its context end and starts draining
	finish   chan struct{}  // closed by endDrain: the drain is over
	stopped  chan time.Time // receives when work has drained
	runErr   chan error
	endOnce  sync.Once
}

// endDrain lets the candidate's work return.
func (c *candidate) endDrain() { c.endOnce.Do(func() { close(c.finish) }) }

// stop ends the candidate's work and returns when it started draining; the drain lasts until endDrain.
func (c *candidate) stop(t *testing.T) time.Time {
	t.Helper()
	c.cancel()
	select {
	case at := <-c.draining:
		return at
	case <-time.After(time.Minute):
		t.Fatalf("candidate %s's work never saw its context end", c.id)
		return time.Time{}
	}
}

// startCandidate starts a candidate that runs until owner ends; t fails if it cannot start.
func startCandidate(t, owner *testing.T, client kubernetes.Interface, lockName, id string) *candidate {
	t.Helper()
	reg := metrics.NewRegistry()
	e, err := leaderelection.New(leaderelection.Config{
		Enabled:       true,
		Client:        client,
		LockName:      lockName,
		Namespace:     namespace,
		Identity:      id,
		Labels:        map[string]string{"stowage.test/candidate-set": "e2e"},
		LeaseDuration: leaseDuration,
		RenewDeadline: renewDeadline,
		RetryPeriod:   retryPeriod,
		ReleaseOnExit: true,
		Registerer:    reg.Registerer(),
		OnLost:        func() { owner.Errorf("candidate %s lost its lease unexpectedly", id) },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := httpserver.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle("/metrics", reg.Handler())
	srv.HandleCheck(leaderelection.HealthzPath, e.Check)
	httpCtx, stopHTTP := context.WithCancel(context.Background())
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(httpCtx) }()

	ctx, cancel := context.WithCancel(context.Background())
	c := &candidate{id: id, http: srv, cancel: cancel,
		leading: make(chan time.Time, 1), draining: make(chan time.Time, 1), finish: make(chan struct{}),
		stopped: make(chan time.Time, 1), runErr: make(chan error, 1)}
	go func() {
		c.runErr <- e.Run(ctx, func(wctx context.Context) error {
			c.leading <- time.Now()
			<-wctx.Done()
			// Draining in-flight work, until the test has seen the lease stay ours meanwhile.
			c.draining <- time.Now()
			<-c.finish
			c.stopped <- time.Now()
			return nil
		})
	}()
	owner.Cleanup(func() {
		c.endDrain()
		cancel()
		stopHTTP()
		if err := <-httpDone; err != nil {
			owner.Errorf("candidate %s HTTP server: %v", id, err)
		}
	})
	return c
}

func lease(t *testing.T, client kubernetes.Interface, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := client.CoordinationV1().Leases(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting lease %s: %v", name, err)
	}
	return l
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// startClients starts a control plane for t and returns a maker of clientsets for it: each candidate gets its
// own, as in a sidecar.
func startClients(t *testing.T) func() kubernetes.Interface {
	c := clustertest.Start(t)
	return func() kubernetes.Interface {
		cs, err := kubernetes.NewForConfig(kubeclient.ForCore(c.RESTConfig()))
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
}

func TestE2ELeaderElectionGracefulHandover(t *testing.T) {
	top := t
	newClient := startClients(t)
	observer := newClient()
	lockName := leaderelection.LockName("external-attacher-leader-", "e2e.csi.stowage.io")

	var a, b *candidate
	if !t.Run("first candidate leads, the second waits, both healthy", func(t *testing.T) {
		a, b = testFirstLeads(t, top, newClient, observer, lockName)
	}) {
		return
	}
	if !t.Run("graceful exit: the lease is kept while work drains, then released for the standby", func(t *testing.T) {
		testHandover(t, observer, lockName, a, b)
	}) {
		return
	}
	t.Run("the last candidate releases the lease on exit", func(t *testing.T) { testLastReleases(t, observer, lockName, b) })
}

// testFirstLeads starts candidate a, waits until it leads, then starts candidate b; both run until owner ends.
func testFirstLeads(t, owner *testing.T, newClient func() kubernetes.Interface, observer kubernetes.Interface, lockName string) (a, b *candidate) {
	a = startCandidate(t, owner, newClient(), lockName, "candidate-a")
	select {
	case <-a.leading:
	case <-time.After(2 * time.Minute):
		t.Fatal("candidate a never became leader")
	}
	b = startCandidate(t, owner, newClient(), lockName, "candidate-b")

	l := lease(t, observer, lockName)
	if holder(l) != "candidate-a" {
		t.Fatalf("lease holder %q, want candidate-a", holder(l))
	}
	if l.Labels["stowage.test/candidate-set"] != "e2e" {
		t.Errorf("lease labels %v lack the configured label", l.Labels)
	}
	for _, cand := range []*candidate{a, b} {
		if code, body := rig.Get(t, context.Background(), cand.http.URL(leaderelection.HealthzPath)); code != http.StatusOK {
			t.Errorf("%s %s = %d %q, want 200", cand.id, leaderelection.HealthzPath, code, body)
		}
	}
	// name="" whatever the Lease, as upstream's sidecars report it.
	if _, body := rig.Get(t, context.Background(), a.http.URL("/metrics")); !containsLine(body, `leader_election_master_status{name=""} 1`) {
		t.Errorf("leader's metrics lack master_status 1")
	}
	if _, body := rig.Get(t, context.Background(), b.http.URL("/metrics")); !containsLine(body, `leader_election_master_status{name=""} 0`) {
		t.Errorf("standby's metrics lack master_status 0")
	}
	return a, b
}

// testHandover stops the leader a and checks b takes over once a's work has drained, before the lease
// would have expired.
func testHandover(t *testing.T, observer kubernetes.Interface, lockName string, a, b *candidate) {
	// Graceful exit of the leader: work drains, then the lease is released.
	drainStart := a.stop(t)
	waitRenewedSince(t, observer, lockName, "candidate-a", drainStart)
	a.endDrain()
	var drained time.Time
	select {
	case drained = <-a.stopped:
	case <-time.After(time.Minute):
		t.Fatal("leader's work did not drain")
	}
	if err := <-a.runErr; err != nil {
		t.Fatalf("leader's Run: %v", err)
	}
	var takeover time.Time
	select {
	case takeover = <-b.leading:
	case <-time.After(2 * time.Minute):
		t.Fatal("standby never became leader")
	}
	if !takeover.After(drained) {
		t.Errorf("standby started leading before the old leader finished draining")
	}
	// Without the release the standby would have had to wait out the whole lease duration after the old
	// leader's last renewal (which happened no earlier than when its drain ended).
	if gap := takeover.Sub(drained); gap >= leaseDuration {
		t.Errorf("standby took over %s after the leader exited, not before the %s lease would have expired: the lease was not released", gap, leaseDuration)
	}
	l := lease(t, observer, lockName)
	if holder(l) != "candidate-b" {
		t.Errorf("lease holder %q after handover, want candidate-b", holder(l))
	}
	if l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions < 1 {
		t.Errorf("lease transitions %v, want at least 1", l.Spec.LeaseTransitions)
	}
	if code, body := rig.Get(t, context.Background(), b.http.URL(leaderelection.HealthzPath)); code != http.StatusOK {
		t.Errorf("new leader %s = %d %q, want 200", leaderelection.HealthzPath, code, body)
	}

}

func testLastReleases(t *testing.T, observer kubernetes.Interface, lockName string, b *candidate) {
	b.stop(t)
	b.endDrain()
	<-b.stopped
	if err := <-b.runErr; err != nil {
		t.Fatalf("new leader's Run: %v", err)
	}
	if got := holder(lease(t, observer, lockName)); got != "" {
		t.Errorf("lease holder %q after the last candidate exited, want released", got)
	}
}

// waitRenewedSince waits until holder renewed the lease after since: a leader whose work drains keeps its
// lease, and renews it, until the drain is over.
func waitRenewedSince(t *testing.T, client kubernetes.Interface, name, holderID string, since time.Time) {
	t.Helper()
	var lost string
	rig.Eventually(t, context.Background(), time.Minute, holderID+" renewing lease "+name+" while it drains", func(ctx context.Context) (bool, error) {
		l, err := client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if h := holder(l); h != holderID {
			lost = h
			return true, nil
		}
		return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(since), nil
	})
	if lost != "" || holder(lease(t, client, name)) != holderID {
		t.Fatalf("lease holder %q while %s drains, want %s: the lease went before the work was done", lost, holderID, holderID)
	}
}

func containsLine(body, line string) bool {
	return slices.Contains(strings.Split(body, "\n"), line)
}
