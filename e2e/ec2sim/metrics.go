package ec2sim

import (
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	// slowed counts the calls Faults.Slow held, by action; they are answered (and counted in requests) too.
	slowed *prometheus.CounterVec
	// calls holds, by action, the AWS SDK invocation IDs (amz-sdk-invocation-id, the same on every attempt of
	// one call) answered with success at least once.
	callsMu sync.Mutex
	calls   map[string]map[string]bool
}

// newMetrics uses a registry of its own, so several emulators in one test binary don't collide.
func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ec2sim_requests_total",
			Help: "EC2 API requests by action and result (the EC2 error code, or OK).",
		}, []string{"action", "code"}),
		slowed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ec2sim_slowed_requests_total",
			Help: "EC2 API requests held longer by the injected Slow fault, by action.",
		}, []string{"action"}),
		calls: map[string]map[string]bool{},
	}
	m.registry.MustRegister(m.requests, m.slowed)
	return m
}

// Requests is how many requests of action the emulator has answered with code ("OK" for success), as
// counted in ec2sim_requests_total: tests compare it before and after a step to count EC2 calls.
func (s *Server) Requests(action, code string) int {
	var m dto.Metric
	if err := s.metrics.requests.WithLabelValues(action, code).Write(&m); err != nil {
		return 0
	}
	return int(m.GetCounter().GetValue())
}

// Slowed is how many requests of action the Slow fault held (ec2sim_slowed_requests_total).
func (s *Server) Slowed(action string) int {
	var m dto.Metric
	if err := s.metrics.slowed.WithLabelValues(action).Write(&m); err != nil {
		return 0
	}
	return int(m.GetCounter().GetValue())
}

// Calls is how many calls of action succeeded, counting a call the AWS SDK retried once: its attempts share one
// amz-sdk-invocation-id, and the SDK retries an attempt whose answer it lost on its side too (aws-sdk-go-v2
// retries a read on a connection its transport closed, a known race), after the emulator answered it. A
// request without the header counts on its own. Tests that count a driver's own EC2 calls use it; Requests
// counts attempts.
func (s *Server) Calls(action string) int {
	s.metrics.callsMu.Lock()
	defer s.metrics.callsMu.Unlock()
	return len(s.metrics.calls[action])
}

// recordCall notes a successful answer to an attempt of the call invocation (a fresh key when empty).
func (m *metrics) recordCall(action, invocation string) {
	m.callsMu.Lock()
	defer m.callsMu.Unlock()
	ids := m.calls[action]
	if ids == nil {
		ids = map[string]bool{}
		m.calls[action] = ids
	}
	if invocation == "" {
		invocation = "request-" + strconv.Itoa(len(ids))
	}
	ids[invocation] = true
}

// Actions are the EC2 actions the emulator serves, in name order: with Requests, they let a caller total
// the answers over every action.
func Actions() []string { return slices.Sorted(maps.Keys(actions)) }

// Mutating reports whether action changes EC2's state (false for a Describe or an unknown action).
func Mutating(action string) bool { return actions[action].mutating }
