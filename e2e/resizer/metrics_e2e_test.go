//go:build e2e

package resizer

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/stowage-csi/stowage/e2e/metricsparity"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// migratedDriver is the CSI driver of an in-tree plugin: upstream's resizer labels its calls with migrated.
const migratedDriver = "ebs.csi.aws.com"

// upstreamResizer is what upstream's csi-resizer serves for migratedDriver after one expansion, besides the
// Go, process and meta families of component-base's global registry (gathered in this process): no peer is
// built for the resizer, so this list stands for it. Its buckets are csi-lib-utils' and client-go's.
func upstreamResizer() metricsparity.Shape {
	queue := func(typ string, buckets []float64) metricsparity.Family {
		return metricsparity.Family{Type: typ, LabelSets: []string{"name"}, Buckets: buckets,
			// The expand and modify controllers both name their queue "<driver>-pvc".
			Values: map[string][]string{"name": {migratedDriver + "-pvc"}}}
	}
	latency := prometheus.ExponentialBuckets(10e-9, 10, 10)
	return metricsparity.Shape{
		"csi_sidecar_operations_seconds": {Type: "HISTOGRAM",
			LabelSets: []string{"driver_name,grpc_status_code,method_name,migrated"},
			Buckets:   []float64{.1, .25, .5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600},
			Values:    map[string][]string{"migrated": {"false"}, "driver_name": {migratedDriver}}},
		"workqueue_adds_total":                        queue("COUNTER", nil),
		"workqueue_depth":                             queue("GAUGE", nil),
		"workqueue_queue_duration_seconds":            queue("HISTOGRAM", latency),
		"workqueue_work_duration_seconds":             queue("HISTOGRAM", latency),
		"workqueue_unfinished_work_seconds":           queue("GAUGE", nil),
		"workqueue_longest_running_processor_seconds": queue("GAUGE", nil),
		"workqueue_retries_total":                     queue("COUNTER", nil),
		// csi-lib-utils never names its elector.
		"leader_election_master_status": {Type: "GAUGE", LabelSets: []string{"name"}, Values: map[string][]string{"name": {""}}},
	}
}

// TestE2EResizerMetricsParity expands one claim of a migrated driver with Stowage's csi-resizer and requires
// upstream's metrics on --http-endpoint: upstream's list above, and the Go and process series of
// component-base's global registry.
func TestE2EResizerMetricsParity(t *testing.T) {
	r := startRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := newDriverFixture(t, ctx, r.Client, migratedDriver, "metrics-expandable")
	addr := e2erig.FreeAddr(t)
	r.startResizer(t, "csi-resizer", f.drv.Endpoint(), append(upstreamArgs, "--http-endpoint="+addr)...)
	const ns = "default"
	f.boundClaim(t, ns, "metrics")
	f.request(t, ns, "metrics", "2Gi")
	f.waitClaim(t, ns, "metrics", "waiting for node expansion", func(c *corev1.PersistentVolumeClaim) bool {
		return c.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimNodeResizePending
	})
	got := metricsparity.Scrape(t, ctx, "http://"+addr+"/metrics")

	want, err := metricsparity.Gather(legacyregistry.DefaultGatherer)
	if err != nil {
		t.Fatal(err)
	}
	for name, fam := range upstreamResizer() {
		want[name] = fam
	}
	o := metricsparity.Sidecar()
	// Upstream's modify controller shares the expand controller's queue name, so their series mix.
	o.ExtraValues = map[string]string{"name=" + migratedDriver + "-pvc-modify": "the modify queue, named apart"}
	metricsparity.Check(t, got, want, o)
}
