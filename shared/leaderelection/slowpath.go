package leaderelection

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/leaderelection"
)

// leader_election_slowpath_total counts the renewals in which the leader could not simply update the Lease it
// last wrote (someone else changed it, or its own view had expired) and had to read it again first: a leader
// that renews on the slow path often is contending with other writers or a slow API server.
//
// client-go counts that inside its LeaderElector and reports it only to the one metrics provider of the
// process, set with leaderelection.SetProvider: only the first call takes effect, and an elector takes the
// provider that is set when it is created. That is client-go's constraint, not a choice here: the counter
// cannot belong to one Elector or one registry, because client-go gives the provider nothing but the Lease
// name (Config.MetricName) to tell electors apart. So the process installs one provider, once, the first time an Elector is
// made (slowpath below), and every Elector registers that provider's counter in its own registry. In a
// sidecar (one Elector per process) that is exactly the sidecar's count; several Electors in one process
// (tests) share one series per metric name, as they would in client-go's own global registry.
//
// The provider reports nothing else: leader_election_master_status stays per Elector (masterStatus).

const slowpathName = "leader_election_slowpath_total"

// slowpathProvider is the provider this package installs in client-go. made counts the LeaderMetrics client-go
// asked it for, one per LeaderElector, so an Elector can tell whether the provider is in effect.
type slowpathProvider struct {
	counter *prometheus.CounterVec
	made    atomic.Int64
	// creating serializes Electors making client-go's elector, so that handoff, read by NewLeaderMetric while
	// client-go makes one, is the flag of the Elector being made.
	creating sync.Mutex
	handoff  atomic.Pointer[atomic.Bool]
}

// slowpath installs the provider in client-go on first use and returns it. This, and the global it wraps, is
// the one process-wide state of the package, forced by client-go as explained above.
var slowpath = sync.OnceValue(func() *slowpathProvider {
	p := &slowpathProvider{counter: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: slowpathName,
		Help: "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease. Please make sure to group by name.",
	}, []string{"name"})}
	leaderelection.SetProvider(p)
	return p
})

// NewLeaderMetric is called by client-go once per LeaderElector it creates.
func (p *slowpathProvider) NewLeaderMetric() leaderelection.LeaderMetric {
	p.made.Add(1)
	return slowpathMetric{counter: p.counter, handoff: p.handoff.Load()}
}

// slowpathMetric counts slow paths; the leader status is the Elector's own gauge. The renewal that follows a
// standby's takeover is not counted: client-go's elector has not seen the Lease yet, so it reads it first (its
// slow path) although nobody contends for it.
type slowpathMetric struct {
	counter *prometheus.CounterVec
	handoff *atomic.Bool
}

func (slowpathMetric) On(string)  {}
func (slowpathMetric) Off(string) {}

func (m slowpathMetric) SlowpathExercised(name string) {
	if m.handoff != nil && m.handoff.CompareAndSwap(true, false) {
		return
	}
	m.counter.WithLabelValues(name).Inc()
}

// registerSlowpath installs the provider (first call in the process) and registers its counter in reg, with
// the series of name at 0 so that it is scraped before the first slow path. A registry that has the
// counter already (a second Elector on it) is fine; one that has another collector of that name is an error.
func registerSlowpath(reg prometheus.Registerer, name string) error {
	p := slowpath()
	if reg == nil {
		return nil
	}
	if err := reg.Register(p.counter); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) || already.ExistingCollector != prometheus.Collector(p.counter) {
			return fmt.Errorf("registering %s: %w", slowpathName, err)
		}
	}
	p.counter.WithLabelValues(name)
	return nil
}
