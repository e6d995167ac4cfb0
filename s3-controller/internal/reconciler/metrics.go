package reconciler

import "github.com/prometheus/client_golang/prometheus"

// Metrics count the Mountpoint Pods this controller creates and deletes.
type Metrics struct {
	createdTotal *prometheus.CounterVec
	deletedTotal prometheus.Counter
}

// NewMetrics creates the counters and registers them in reg (nil: not registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		createdTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "s3_controller_mountpoint_pods_created_total",
			Help: "Mountpoint Pods created, by reason: new (a workload needed one) or repair (an assigned one was gone).",
		}, []string{"reason"}),
		deletedTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "s3_controller_mountpoint_pods_deleted_total",
			Help: "Succeeded Mountpoint Pods deleted.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.createdTotal, m.deletedTotal)
	}
	return m
}

func (m *Metrics) created(reason string) { m.createdTotal.WithLabelValues(reason).Inc() }
func (m *Metrics) deleted()              { m.deletedTotal.Inc() }
