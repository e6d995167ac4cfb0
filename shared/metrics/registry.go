// Package metrics owns the one Prometheus registry of a Stowage process. Every metric a binary exposes (Go and
// process collectors, work queues, leader election) is registered here, csi_sidecar_operations_seconds is
// served beside it (ServeCalls), and shared/httpserver serves both, instead of client-go's and
// component-base's global registries: nothing is registered as a side effect of an import, and tests can
// build as many independent registries as they like.
// One collector is shared by the registries of a process: leader_election_slowpath_total, which client-go
// reports only to a process-wide provider (see shared/leaderelection).
package metrics

import (
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	k8smetrics "k8s.io/component-base/metrics"
)

// Registry is a component-base KubeRegistry, because csi-lib-utils' metrics manager registers
// csi_sidecar_operations_seconds only into that type; plain Prometheus collectors go in through Registerer.
type Registry struct {
	kube k8smetrics.KubeRegistry
	// calls is the registry of csi_sidecar_operations_seconds when it lives apart (ServeCalls), nil otherwise.
	calls   atomic.Pointer[prometheus.Gatherer]
	handler http.Handler
}

// NewRegistry returns a registry with the Go and process collectors, and a scrape handler that counts its own
// requests (promhttp_metric_handler_requests_total).
func NewRegistry() *Registry {
	return newRegistry(collectors.NewGoCollector(), true)
}

// NewSidecarRegistry returns the registry of a sidecar whose upstream serves component-base's global
// registry (the attacher, provisioner, resizer and csi-snapshotter): its Go collector with every runtime
// metric (go_gc_*, go_sched_*, go_memory_classes_* ...) and its meta metrics (registered_metrics_total and
// the like), so the go_* panels of upstream's dashboards find their series. countScrapes adds the scrape
// handler's own promhttp_metric_handler_* series, which only upstream's provisioner serves.
func NewSidecarRegistry(countScrapes bool) *Registry {
	r := newRegistry(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsAll)), countScrapes)
	r.kube.RegisterMetaMetrics()
	return r
}

func newRegistry(goCollector prometheus.Collector, countScrapes bool) *Registry {
	kube := k8smetrics.NewKubeRegistry()
	kube.RawMustRegister(goCollector, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r := &Registry{kube: kube}
	r.handler = promhttp.HandlerFor(r.Gatherer(), promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	if countScrapes {
		r.handler = promhttp.InstrumentMetricHandler(kube.Registerer(), r.handler)
	}
	return r
}

// ServeCalls serves g, the registry of a csi-lib-utils metrics manager, beside this one, in place of the
// one given before. A sidecar swaps its manager for one with the migrated label once it knows the driver
// (shared/sidecar), and the two cannot share a registry: their histograms have one name and two label sets.
func (r *Registry) ServeCalls(g prometheus.Gatherer) { r.calls.Store(&g) }

// Kube returns the registry as a KubeRegistry, for csi-lib-utils' metrics.WithCustomRegistry.
func (r *Registry) Kube() k8smetrics.KubeRegistry { return r.kube }

// Registerer is where plain Prometheus collectors are registered.
func (r *Registry) Registerer() prometheus.Registerer { return r.kube.Registerer() }

// Gatherer collects every registered metric, and those of the registry given to ServeCalls.
func (r *Registry) Gatherer() prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		g := prometheus.Gatherers{r.kube}
		if calls := r.calls.Load(); calls != nil {
			g = append(g, *calls)
		}
		return g.Gather()
	})
}

// Handler serves the registry in the Prometheus text format.
func (r *Registry) Handler() http.Handler { return r.handler }
