// Package metrics holds the driver's Prometheus metrics, with upstream's names and labels so existing
// dashboards and alerts keep working.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Recorder records EC2 API calls.
type Recorder struct {
	registry  *prometheus.Registry
	duration  *prometheus.HistogramVec
	errors    *prometheus.CounterVec
	throttles *prometheus.CounterVec
}

// New returns a Recorder with its own registry (no global state).
func New() *Recorder {
	r := &Recorder{
		registry: prometheus.NewRegistry(),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "aws_ebs_csi_api_request_duration_seconds",
			Help:    "Latency of successful EC2 API requests, including retries.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"request"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aws_ebs_csi_api_request_errors_total",
			Help: "EC2 API requests that failed after retries, by error code.",
		}, []string{"request", "code"}),
		throttles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aws_ebs_csi_api_request_throttles_total",
			Help: "EC2 API attempts that were throttled.",
		}, []string{"operation_name"}),
	}
	r.registry.MustRegister(r.duration, r.errors, r.throttles,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// ObserveRequest records one API request's outcome. code is "" on success.
func (r *Recorder) ObserveRequest(request string, d time.Duration, code string) {
	if r == nil {
		return
	}
	if code == "" {
		r.duration.WithLabelValues(request).Observe(d.Seconds())
		return
	}
	r.errors.WithLabelValues(request, code).Inc()
}

// ObserveThrottle records one throttled attempt.
func (r *Recorder) ObserveThrottle(operation string) {
	if r == nil {
		return
	}
	r.throttles.WithLabelValues(operation).Inc()
}

// Gatherer exposes the registry, for tests.
func (r *Recorder) Gatherer() prometheus.Gatherer { return r.registry }

// Handler serves the registry in the Prometheus exposition format.
func (r *Recorder) Handler() http.Handler {
	return promhttp.HandlerFor(r.registry, promhttp.HandlerOpts{})
}
