package leaderelection

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/stowage-csi/stowage/shared/testutil"
)

// slowpathCount reads leader_election_slowpath_total{name} as reg serves it; -1 if reg has no such series.
func slowpathCount(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != slowpathName {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == name {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

// Someone else writes the Lease while we lead (here: a label), so the leader's next optimistic renewal carries a
// stale resourceVersion and gets 409; client-go then reads the Lease again and renews on the slow path, which
// the registry the Elector was given must show.
func TestSlowPathRenewalIsCounted(t *testing.T) {
	// A Lease name of its own: the counter is one per process (slowpath.go), so neither other tests nor an
	// earlier run of this one (-count) may have moved its series.
	lock := fmt.Sprintf("slowpath-test-%d-ebs-csi-aws-com", time.Now().UnixNano())
	client := testutil.NewClientset() // answers a stale resourceVersion with 409, as the API server does
	reg := prometheus.NewRegistry()
	cfg := testConfig(client, "a")
	cfg.LockName, cfg.MetricName, cfg.Registerer = lock, lock, reg
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A second Elector's registry serves the same counter.
	other := prometheus.NewRegistry()
	cfg2 := cfg
	cfg2.Registerer = other
	if _, err := New(cfg2); err != nil {
		t.Fatalf("a second Elector: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leading := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		result <- e.Run(ctx, func(wctx context.Context) error {
			close(leading)
			<-wctx.Done()
			return nil
		})
	}()
	<-leading
	if got := slowpathCount(t, reg, lock); got != 0 {
		t.Fatalf("leader_election_slowpath_total = %v after acquiring a new Lease, want 0", got)
	}

	leases := client.CoordinationV1().Leases(testNS)
	testutil.Eventually(t, 30*time.Second, "an outside write to the Lease", func() (bool, error) {
		l, err := leases.Get(context.Background(), lock, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		l.Labels = map[string]string{"touched": "yes"}
		_, err = leases.Update(context.Background(), l, metav1.UpdateOptions{})
		return err == nil, err // a Conflict means a renewal came in between: read and try again
	})
	testutil.Eventually(t, 30*time.Second, "a slow-path renewal to be counted", func() (bool, error) {
		return slowpathCount(t, reg, lock) >= 1, nil
	})
	if got, want := slowpathCount(t, other, lock), slowpathCount(t, reg, lock); got < 1 || got > want {
		t.Errorf("the second registry serves %v, want the same counter (>= 1, <= %v)", got, want)
	}
	l, err := leases.Get(context.Background(), lock, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if holder(l) != "a" || l.Labels["touched"] != "yes" {
		t.Errorf("after the slow path the Lease is held by %q with labels %v, want a, and the outside label kept", holder(l), l.Labels)
	}
	cancel()
	if err := <-result; err != nil {
		t.Fatalf("Run() = %v", err)
	}
}

func TestSlowpathRegistrationRefusesAForeignCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Name: slowpathName, Help: "someone else's"}, []string{"name"}))
	cfg := testConfig(fake.NewClientset(), "a")
	cfg.Registerer = reg
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), slowpathName) {
		t.Fatalf("New() = %v, want an error naming %s", err, slowpathName)
	}
	if n, err := promtestutil.GatherAndCount(reg, slowpathName); err != nil || n != 0 {
		t.Errorf("%d series (%v) of the foreign collector, want it untouched", n, err)
	}
}

// Upstream's sidecars never name their elector, so both leader-election series carry name="" whatever the
// Lease; an Elector without a MetricName must report the same, or dashboards matching name="" see nothing.
// The slow-path counter is one per process (other tests' names show too), so only its name="" series is required.
func TestMetricsNameIsEmptyByDefault(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := testConfig(testutil.NewClientset(), "a")
	cfg.Registerer = reg
	if _, err := New(cfg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	unnamed := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "name" {
					continue
				}
				if l.GetValue() == "" {
					unnamed[mf.GetName()] = true
				} else if mf.GetName() == "leader_election_master_status" {
					t.Errorf("%s{name=%q}, want only name=\"\" as upstream", mf.GetName(), l.GetValue())
				}
			}
		}
	}
	for _, want := range []string{"leader_election_master_status", slowpathName} {
		if !unnamed[want] {
			t.Errorf("%s has no name=\"\" series", want)
		}
	}
}
