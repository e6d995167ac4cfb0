package ec2sim

import "github.com/prometheus/client_golang/prometheus"

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
