// Package opmetrics measures the snapshot controller's operations the way upstream's snapshot-controller does
// (external-snapshotter pkg/metrics): the time from a VolumeSnapshot's first sync to the moment its snapshot is
// created, ready, or deleted, and how many such operations are open. The controller serves only this registry,
// as upstream does: no workqueue, leader election or Go runtime metrics.
package opmetrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	k8smetrics "k8s.io/component-base/metrics"
)

// Operation names (label operation_name), upstream's pkg/metrics metrics.go and metrics_group.go.
const (
	CreateSnapshot              = "CreateSnapshot"
	CreateSnapshotAndReady      = "CreateSnapshotAndReady"
	DeleteSnapshot              = "DeleteSnapshot"
	CreateGroupSnapshot         = "CreateGroupSnapshot"
	CreateGroupSnapshotAndReady = "CreateGroupSnapshotAndReady"
	DeleteGroupSnapshot         = "DeleteGroupSnapshot"
)

// cancels are the creation operations that a deletion's end cancels when they are still open.
var cancels = map[string][]string{
	DeleteSnapshot:      {CreateSnapshot, CreateSnapshotAndReady},
	DeleteGroupSnapshot: {CreateGroupSnapshot, CreateGroupSnapshotAndReady},
}

// Snapshot types (label snapshot_type).
const (
	Dynamic        = "dynamic"
	PreProvisioned = "pre-provisioned"
)

// Operation outcomes (label operation_status).
const (
	StatusSuccess = "success"
	StatusCancel  = "cancel"
	StatusUnknown = "unknown"
)

// unknownDriver labels an operation whose driver is not known yet, as upstream does.
const unknownDriver = "unknown"

// buckets are upstream's (pkg/metrics metricBuckets).
var buckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300, 600}

type key struct {
	op  string
	uid types.UID
}

type value struct {
	driver       string
	snapshotType string
	start        time.Time
}

// Manager keeps the start of each open operation and observes its duration when it ends.
type Manager struct {
	registry k8smetrics.KubeRegistry
	latency  *prometheus.HistogramVec
	inFlight prometheus.Gauge
	now      func() time.Time

	mu   sync.Mutex
	open map[key]value
}

// New returns a manager with its own registry holding snapshot_controller_operation_total_seconds,
// snapshot_controller_operations_in_flight and process_start_time_seconds.
func New() (*Manager, error) {
	m := &Manager{
		registry: k8smetrics.NewKubeRegistry(),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "snapshot_controller",
			Name:      "operation_total_seconds",
			Help:      "Total number of seconds spent by the controller on an operation",
			Buckets:   buckets,
		}, []string{"driver_name", "operation_name", "snapshot_type", "operation_status"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "snapshot_controller",
			Name:      "operations_in_flight",
			Help:      "Total number of operations in flight",
		}),
		now:  time.Now,
		open: map[key]value{},
	}
	if err := k8smetrics.RegisterProcessStartTime(m.registry.Register); err != nil {
		return nil, err
	}
	for _, c := range []prometheus.Collector{m.latency, m.inFlight} {
		if err := m.registry.Registerer().Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Handler serves the registry in the Prometheus text format.
func (m *Manager) Handler() http.Handler {
	return k8smetrics.HandlerFor(m.registry, k8smetrics.HandlerOpts{ErrorHandling: k8smetrics.ContinueOnError})
}

// Gatherer exposes the registry to tests.
func (m *Manager) Gatherer() prometheus.Gatherer { return m.registry }

// Start opens operation op of the snapshot or group snapshot uid unless it is open already: the first sync sets the start time.
func (m *Manager) Start(op string, uid types.UID, driver, snapshotType string) {
	if driver == "" {
		driver = unknownDriver
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{op, uid}
	if v, ok := m.open[k]; ok {
		// A later sync may know the driver the first did not.
		if v.driver == unknownDriver && driver != unknownDriver {
			v.driver = driver
			m.open[k] = v
		}
		return
	}
	m.open[k] = value{driver: driver, snapshotType: snapshotType, start: m.now()}
	m.inFlight.Set(float64(len(m.open)))
}

// Record closes operation op of uid with status and observes its duration; it does nothing if the operation is
// not open. Ending a deletion cancels the (group) snapshot's creation operations still open, as upstream does
// (upstream records a group's deletion through its single-snapshot path, which cancels nothing; its group path
// cancels the group's creations, as here).
func (m *Manager) Record(op string, uid types.UID, status, driver string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{op, uid}
	v, ok := m.open[k]
	if !ok {
		return
	}
	if driver == "" || driver == unknownDriver {
		driver = v.driver
	}
	d := m.now().Sub(v.start).Seconds()
	m.latency.WithLabelValues(driver, op, v.snapshotType, status).Observe(d)
	delete(m.open, k)
	for _, create := range cancels[op] {
		ck := key{create, uid}
		if cv, ok := m.open[ck]; ok {
			m.latency.WithLabelValues(cv.driver, create, cv.snapshotType, StatusCancel).Observe(d)
			delete(m.open, ck)
		}
	}
	m.inFlight.Set(float64(len(m.open)))
}
