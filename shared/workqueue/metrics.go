package workqueue

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Metrics is the per-process workqueue metrics provider and the registry of queue names.
//
// client-go's workqueue.SetProvider is a process-global, set-once switch, and component-base's provider
// registers into the global legacyregistry. Instead, each queue gets this provider through
// TypedRateLimitingQueueConfig.MetricsProvider, so the metrics land in the registry the caller passes and no
// package-level state is involved. The metric names are upstream's
// (workqueue_{depth,adds_total,queue_duration_seconds,work_duration_seconds,unfinished_work_seconds,
// longest_running_processor_seconds,retries_total}{name}), so dashboards keep working.
type Metrics struct {
	depth          *prometheus.GaugeVec
	adds           *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	workDuration   *prometheus.HistogramVec
	unfinished     *prometheus.GaugeVec
	longestRunning *prometheus.GaugeVec
	retries        *prometheus.CounterVec

	mu    sync.Mutex
	names map[string]bool
}

var _ workqueue.MetricsProvider = (*Metrics)(nil)

// NewMetrics creates the workqueue metric families and registers them in reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	const subsystem = "workqueue"
	label := []string{"name"}
	m := &Metrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: subsystem, Name: "depth",
			Help: "Current depth of workqueue"}, label),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: subsystem, Name: "adds_total",
			Help: "Total number of adds handled by workqueue"}, label),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: subsystem, Name: "queue_duration_seconds",
			Help: "How long in seconds an item stays in workqueue before being requested.", Buckets: prometheus.ExponentialBuckets(10e-9, 10, 10)}, label),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: subsystem, Name: "work_duration_seconds",
			Help: "How long in seconds processing an item from workqueue takes.", Buckets: prometheus.ExponentialBuckets(10e-9, 10, 10)}, label),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: subsystem, Name: "unfinished_work_seconds",
			Help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases."}, label),
		longestRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: subsystem, Name: "longest_running_processor_seconds",
			Help: "How many seconds has the longest running processor for workqueue been running."}, label),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: subsystem, Name: "retries_total",
			Help: "Total number of retries handled by workqueue"}, label),
		names: map[string]bool{},
	}
	for _, c := range []prometheus.Collector{m.depth, m.adds, m.latency, m.workDuration, m.unfinished, m.longestRunning, m.retries} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering workqueue metrics: %w", err)
		}
	}
	return m, nil
}

// claim reserves a queue name. Two queues with one name would add into the same series, which is what makes
// upstream's provisioner and resizer metrics unreadable ("claims" and "<driver>-pvc" are used twice).
func (m *Metrics) claim(name string) error {
	if name == "" {
		return fmt.Errorf("workqueue name must not be empty")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.names[name] {
		return fmt.Errorf("workqueue name %q is already in use in this process", name)
	}
	m.names[name] = true
	return nil
}

func (m *Metrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return m.depth.WithLabelValues(name)
}

func (m *Metrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return m.adds.WithLabelValues(name)
}

func (m *Metrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return m.latency.WithLabelValues(name)
}

func (m *Metrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return m.workDuration.WithLabelValues(name)
}

func (m *Metrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.unfinished.WithLabelValues(name)
}

func (m *Metrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.longestRunning.WithLabelValues(name)
}

func (m *Metrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return m.retries.WithLabelValues(name)
}
