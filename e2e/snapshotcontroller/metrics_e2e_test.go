//go:build e2e

package snapshotcontroller

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/metricsparity"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// TestE2ESnapshotControllerMetricsParity runs Stowage's snapshot-controller and csi-snapshotter, then
// upstream's pair, each through one dynamic snapshot made and deleted, and requires the same metrics on the
// controller's --http-endpoint: upstream serves only its operation metrics and process_start_time_seconds
// there, with no work queue, leader election or Go series.
func TestE2ESnapshotControllerMetricsParity(t *testing.T) {
	r := startRig(t, false)
	stowage, upstream := stowageBinaries(t), upstreamBinaries(t)
	drv := startDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	scrape := func(name string, bins binaries) metricsparity.Shape {
		addr := e2erig.FreeAddr(t)
		// Without leader election, so the second pair need not wait out the first one's Lease.
		ctrl := r.startController(t, "snapshot-controller-"+name, bins.controller, "--leader-election=false", "--http-endpoint="+addr)
		snap := r.startSnapshotter(t, "csi-snapshotter-"+name, bins.snapshotter, drv.Endpoint(), "--leader-election=false")
		dynamicDelete(fixture{t: t, ctx: ctx, r: r, drv: drv}, "metrics-"+name)
		s := metricsparity.Scrape(t, ctx, "http://"+addr+"/metrics")
		for _, p := range []*e2erig.Process{ctrl, snap} {
			p.Signal(syscall.SIGTERM)
			<-p.Done()
		}
		return s
	}
	got := scrape("stowage", stowage)
	want := scrape("upstream", upstream)
	metricsparity.Check(t, got, want, metricsparity.Options{Values: []string{"operation_name", "snapshot_type", "operation_status"}})
}
