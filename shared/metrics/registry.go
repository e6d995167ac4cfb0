// Package metrics owns the one Prometheus registry of a Stowage process. Every metric a binary exposes (Go and
// process collectors, work queues, leader election, csi_sidecar_operations_seconds) is registered here and
// served by shared/httpserver, instead of in client-go's and component-base's global registries: nothing is
// registered as a side effect of an import, and tests can build as many independent registries as they like.
// One collector is shared by the registries of a process: leader_election_slowpath_total, which client-go
// reports only to a process-wide provider (see shared/leaderelection).
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	k8smetrics "k8s.io/component-base/metrics"
)

// Registry is a component-base KubeRegistry, because csi-lib-utils' metrics manager registers
// csi_sidecar_operations_seconds only into that type; plain Prometheus collectors go in through Registerer.
type Registry struct {
	kube    k8smetrics.KubeRegistry
	handler http.Handler
}

// NewRegistry returns a registry with the Go and process collectors, and a scrape handler that counts its own
// requests (promhttp_metric_handler_requests_total, as upstream's provisioner serves).
func NewRegistry() *Registry {
	kube := k8smetrics.NewKubeRegistry()
	kube.RawMustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	handler := promhttp.InstrumentMetricHandler(kube.Registerer(),
		promhttp.HandlerFor(kube, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	return &Registry{kube: kube, handler: handler}
}

// Kube returns the registry as a KubeRegistry, for csi-lib-utils' metrics.WithCustomRegistry.
func (r *Registry) Kube() k8smetrics.KubeRegistry { return r.kube }

// Registerer is where plain Prometheus collectors are registered.
func (r *Registry) Registerer() prometheus.Registerer { return r.kube.Registerer() }

// Gatherer collects every registered metric.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.kube }

// Handler serves the registry in the Prometheus text format.
func (r *Registry) Handler() http.Handler { return r.handler }
