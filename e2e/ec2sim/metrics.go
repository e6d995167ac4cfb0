package ec2sim

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	// slowed counts the calls Faults.Slow held, by action; they are answered (and counted in requests) too.
	slowed *prometheus.CounterVec
	// retried counts the requests an AWS SDK marked as a retry of one it had sent (amz-sdk-request attempt
	// above 1), by action; they are counted in requests too.
	retried *prometheus.CounterVec
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
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ec2sim_retried_requests_total",
			Help: "EC2 API requests an AWS SDK sent again after an attempt it saw fail (amz-sdk-request attempt > 1), by action.",
		}, []string{"action"}),
	}
	m.registry.MustRegister(m.requests, m.slowed, m.retried)
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

// Retried is how many requests of action an AWS SDK sent as a retry (ec2sim_retried_requests_total). A
// caller that counts the calls its own logic makes subtracts them: the SDK retries an attempt whose answer
// it lost on its side too (aws-sdk-go-v2 retries a read on a connection its transport closed, a known race),
// and the emulator has answered both.
func (s *Server) Retried(action string) int {
	var m dto.Metric
	if err := s.metrics.retried.WithLabelValues(action).Write(&m); err != nil {
		return 0
	}
	return int(m.GetCounter().GetValue())
}

// Actions are the EC2 actions the emulator serves, in name order: with Requests, they let a caller total
// the answers over every action.
func Actions() []string { return slices.Sorted(maps.Keys(actions)) }

// Mutating reports whether action changes EC2's state (false for a Describe or an unknown action).
func Mutating(action string) bool { return actions[action].mutating }
