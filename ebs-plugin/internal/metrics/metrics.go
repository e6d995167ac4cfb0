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

// operations are the EC2 calls whose duration series exist from start-up, at zero, as upstream makes them:
// a dashboard's per-operation panels and absent() alerts see every operation before its first call.
func operations() []string {
	return []string{
		"CreateVolume", "DeleteVolume", "AttachVolume", "DetachVolume", "ModifyVolume", "DescribeVolumes",
		"DescribeVolumesModifications", "CreateSnapshot", "DeleteSnapshot", "DescribeSnapshots", "DescribeInstances",
		"DescribeAvailabilityZones", "DescribeTags", "CreateTags", "DeleteTags", "EnableFastSnapshotRestores",
	}
}

// Recorder records EC2 API calls, one observation per HTTP attempt as upstream counts them.
type Recorder struct {
	registry *prometheus.Registry
	api      apiFamilies
	// deprecated, set by EmitDeprecated, repeats every observation under the names upstream's driver used
	// before its aws_ebs_csi_* ones (--deprecated-metrics).
	deprecated *apiFamilies
	detaches   *DetachTracker
}

// apiFamilies are the three families of EC2 attempts: successes' durations, errors and throttles.
type apiFamilies struct {
	duration  *prometheus.HistogramVec
	errors    *prometheus.CounterVec
	throttles *prometheus.CounterVec
}

// newAPIFamilies makes the families under the three names given, with upstream's labels, registers them and
// creates each operation's duration series at zero.
func newAPIFamilies(reg prometheus.Registerer, duration, errors, throttles, helpSuffix string) apiFamilies {
	f := apiFamilies{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: duration,
			Help: "Latency of successful EC2 API attempts, retries each timed on their own" + helpSuffix + ".",
			// Upstream registers this histogram without buckets, which is Prometheus' default set.
			Buckets: prometheus.DefBuckets,
		}, []string{"request"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: errors,
			Help: "EC2 API attempts that failed with an error code other than throttling" + helpSuffix + ".",
		}, []string{"request", "code"}),
		throttles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: throttles,
			Help: "EC2 API attempts that were throttled" + helpSuffix + ".",
		}, []string{"operation_name"}),
	}
	reg.MustRegister(f.duration, f.errors, f.throttles)
	for _, op := range operations() {
		f.duration.WithLabelValues(op)
	}
	return f
}

// New returns a Recorder with its own registry (no global state).
func New() *Recorder {
	r := &Recorder{registry: prometheus.NewRegistry()}
	r.api = newAPIFamilies(r.registry, "aws_ebs_csi_api_request_duration_seconds", "aws_ebs_csi_api_request_errors_total",
		"aws_ebs_csi_api_request_throttles_total", "")
	r.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// EmitDeprecated makes the Recorder also serve every EC2 attempt under upstream's deprecated names,
// cloudprovider_aws_api_request_duration_seconds, cloudprovider_aws_api_request_errors and
// cloudprovider_aws_api_throttled_requests_total, with the same labels, as upstream's --deprecated-metrics
// does for dashboards that still read them.
func (r *Recorder) EmitDeprecated() {
	f := newAPIFamilies(r.registry, "cloudprovider_aws_api_request_duration_seconds", "cloudprovider_aws_api_request_errors",
		"cloudprovider_aws_api_throttled_requests_total", " (deprecated)")
	r.deprecated = &f
}

// TrackDetaches registers the controller's EC2 collector (DetachTracker), as upstream's controller does.
func (r *Recorder) TrackDetaches() {
	r.detaches = newDetachTracker(DetachPendingThreshold, time.Now)
	r.registry.MustRegister(r.detaches)
}

// Detaches is the tracker of pending detaches; nil (which records nothing) unless TrackDetaches ran.
func (r *Recorder) Detaches() *DetachTracker {
	if r == nil {
		return nil
	}
	return r.detaches
}

// ObserveSuccess records one attempt that succeeded after d.
func (r *Recorder) ObserveSuccess(request string, d time.Duration) {
	if r == nil {
		return
	}
	r.api.duration.WithLabelValues(request).Observe(d.Seconds())
	if r.deprecated != nil {
		r.deprecated.duration.WithLabelValues(request).Observe(d.Seconds())
	}
}

// ObserveError records one attempt that EC2 answered with the error code code (not a throttle).
func (r *Recorder) ObserveError(request, code string) {
	if r == nil {
		return
	}
	r.api.errors.WithLabelValues(request, code).Inc()
	if r.deprecated != nil {
		r.deprecated.errors.WithLabelValues(request, code).Inc()
	}
}

// ObserveThrottle records one throttled attempt.
func (r *Recorder) ObserveThrottle(operation string) {
	if r == nil {
		return
	}
	r.api.throttles.WithLabelValues(operation).Inc()
	if r.deprecated != nil {
		r.deprecated.throttles.WithLabelValues(operation).Inc()
	}
}

// Register adds a collector of another package to the registry, such as the node's NVMe statistics.
func (r *Recorder) Register(c prometheus.Collector) error {
	return r.registry.Register(c)
}

// Gatherer exposes the registry, for tests.
func (r *Recorder) Gatherer() prometheus.Gatherer { return r.registry }

// Handler serves the registry in the Prometheus exposition format.
func (r *Recorder) Handler() http.Handler {
	return promhttp.HandlerFor(r.registry, promhttp.HandlerOpts{})
}
