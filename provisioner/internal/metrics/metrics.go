// Package metrics holds the provisioner's Prometheus metrics, named as upstream names them so dashboards keep
// working: controller_persistentvolumeclaim_provision_* and controller_persistentvolume_delete_*.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics records provisioning and deletion outcomes. A nil *Metrics records nothing, so tests need no registry.
type Metrics struct {
	provisionTotal    *prometheus.CounterVec
	provisionFailed   *prometheus.CounterVec
	provisionDuration *prometheus.HistogramVec
	deleteTotal       *prometheus.CounterVec
	deleteFailed      *prometheus.CounterVec
	deleteDuration    *prometheus.HistogramVec
}

// New creates the metrics and registers them with reg.
func New(reg prometheus.Registerer) *Metrics {
	// Upstream's provisioner library times these with Prometheus' default buckets, not the CSI call buckets of
	// csi_sidecar_operations_seconds; dashboards' histogram_quantile queries depend on the same bounds.
	buckets := prometheus.DefBuckets
	m := &Metrics{
		provisionTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_persistentvolumeclaim_provision_total",
			Help: "Number of volumes provisioned successfully.",
		}, []string{"class", "source"}),
		provisionFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_persistentvolumeclaim_provision_failed_total",
			Help: "Number of failed provisioning attempts.",
		}, []string{"class", "source"}),
		provisionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "controller_persistentvolumeclaim_provision_duration_seconds",
			Help:    "Latency in seconds to provision persistent volumes. Failed provisioning attempts are ignored.",
			Buckets: buckets,
		}, []string{"class", "source"}),
		deleteTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_persistentvolume_delete_total",
			Help: "Number of volumes deleted successfully.",
		}, []string{"class"}),
		deleteFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_persistentvolume_delete_failed_total",
			Help: "Number of failed volume deletion attempts.",
		}, []string{"class"}),
		deleteDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "controller_persistentvolume_delete_duration_seconds",
			Help:    "Latency in seconds to delete persistent volumes. Failed deletion attempts are ignored.",
			Buckets: buckets,
		}, []string{"class"}),
	}
	reg.MustRegister(m.provisionTotal, m.provisionFailed, m.provisionDuration, m.deleteTotal, m.deleteFailed, m.deleteDuration)
	return m
}

// Provisioned records one provisioning attempt that started at start; source is "", "PersistentVolumeClaim"
// or "VolumeSnapshot" as upstream labels it. As upstream, only a successful attempt is timed: a failed one
// only counts, so retries that fail fast do not pull the latency quantiles down.
func (m *Metrics) Provisioned(class, source string, start time.Time, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.provisionFailed.WithLabelValues(class, source).Inc()
		return
	}
	m.provisionDuration.WithLabelValues(class, source).Observe(time.Since(start).Seconds())
	m.provisionTotal.WithLabelValues(class, source).Inc()
}

// Deleted records one deletion attempt that started at start; as for provisioning, only successes are timed.
func (m *Metrics) Deleted(class string, start time.Time, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.deleteFailed.WithLabelValues(class).Inc()
		return
	}
	m.deleteDuration.WithLabelValues(class).Observe(time.Since(start).Seconds())
	m.deleteTotal.WithLabelValues(class).Inc()
}
