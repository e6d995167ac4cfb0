package sidecar

import (
	"sync/atomic"
	"time"

	csimetrics "github.com/kubernetes-csi/csi-lib-utils/metrics"
	"github.com/prometheus/client_golang/prometheus"
	k8smetrics "k8s.io/component-base/metrics"
	csitrans "k8s.io/csi-translation-lib"

	"github.com/stowage-csi/stowage/shared/metrics"
)

// callMetrics is the metrics manager of the CSI connection: csi_sidecar_operations_seconds.
//
// Upstream's attacher, provisioner and resizer give that histogram the migrated label only when the driver is
// the CSI replacement of an in-tree plugin, which they learn from GetPluginInfo once connected: they then
// reconnect with a second manager that has the label, and serve only that one. Here the connection keeps this
// manager, which starts without the label and switches to one with it once the driver is known (driverKnown),
// so the label set is upstream's for every driver without a second connection. Each manager has a registry of
// its own, because two histograms of one name with different labels cannot share one; the process registry
// serves whichever is current.
type callMetrics struct {
	current atomic.Pointer[managerBox]
	reg     *metrics.Registry
	// migration is Options.Migration: this sidecar labels the calls of a migrated driver.
	migration bool
}

// managerBox lets an interface value sit behind an atomic.Pointer.
type managerBox struct{ csimetrics.CSIMetricsManager }

func newCallMetrics(reg *metrics.Registry, migration bool) *callMetrics {
	c := &callMetrics{reg: reg, migration: migration}
	c.use(csimetrics.NewCSIMetricsManagerWithOptions("", csimetrics.WithProcessStartTime(false)))
	return c
}

func (c *callMetrics) use(m csimetrics.CSIMetricsManager) {
	c.current.Store(&managerBox{m})
	c.reg.ServeCalls(m.GetRegistry())
}

func (c *callMetrics) load() csimetrics.CSIMetricsManager { return c.current.Load().CSIMetricsManager }

// driverKnown names the driver on every series from now on and, for a sidecar with Migration and a driver
// that replaces an in-tree plugin, switches to the manager with the migrated label, as upstream does. The
// calls made before (Probe, GetPluginInfo) stay on the first manager, which is no longer served: upstream's
// first manager is not served either.
func (c *callMetrics) driverKnown(name string) {
	if c.migration && csitrans.New().IsMigratedCSIDriverByName(name) {
		c.use(csimetrics.NewCSIMetricsManagerWithOptions(name, csimetrics.WithProcessStartTime(false),
			csimetrics.WithMigration()))
		return
	}
	c.load().SetDriverName(name)
}

func (c *callMetrics) GetRegistry() k8smetrics.KubeRegistry { return c.load().GetRegistry() }

func (c *callMetrics) RecordMetrics(operation string, err error, d time.Duration) {
	c.load().RecordMetrics(operation, err, d)
}

func (c *callMetrics) WithLabelValues(labels map[string]string) (csimetrics.CSIMetricsManager, error) {
	return c.load().WithLabelValues(labels)
}

func (c *callMetrics) HaveAdditionalLabel(name string) bool {
	return c.load().HaveAdditionalLabel(name)
}

func (c *callMetrics) WithAdditionalRegistry(g prometheus.Gatherer) csimetrics.CSIMetricsManager {
	return c.load().WithAdditionalRegistry(g)
}

func (c *callMetrics) SetDriverName(name string) { c.load().SetDriverName(name) }

func (c *callMetrics) RegisterToServer(s csimetrics.Server, path string) {
	c.load().RegisterToServer(s, path)
}

func (c *callMetrics) RegisterPprofToServer(s csimetrics.Server) { c.load().RegisterPprofToServer(s) }
