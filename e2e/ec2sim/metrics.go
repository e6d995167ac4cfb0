package ec2sim

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
}

// newMetrics uses a registry of its own, so several emulators in one test binary don't collide.
func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ec2sim_requests_total",
			Help: "EC2 API requests by action and result (the EC2 error code, or OK).",
		}, []string{"action", "code"}),
	}
	m.registry.MustRegister(m.requests)
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
