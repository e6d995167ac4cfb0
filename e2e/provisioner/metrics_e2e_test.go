//go:build e2e

package provisioner

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/metricsparity"
)

// TestE2EProvisionerMetricsParity runs Stowage's csi-provisioner and then upstream's on one driver, each
// through one claim provisioned and deleted with capacity tracking on, and requires the same metrics on
// --http-endpoint: families, label names, histogram buckets, queue and lease names, the CSI methods called.
func TestE2EProvisionerMetricsParity(t *testing.T) {
	e := setUpProvisionerTest(t)
	upstream, ours := peerBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	scrape := func(name, path string) metricsparity.Shape {
		p := startProvisionerAt(t, e.r, path, e.drv.Endpoint(), sharedArgs()...)
		waitBound(t, e.kube, createClaim(t, e.kube, claim(e.ns, name, "immediate", "1Gi")))
		deleteClaimsWaitPVsGone(t, e.kube, e.ns, name)
		// Capacity is published for the WaitForFirstConsumer class: its gauges have their series once it is.
		testCapacity(t, e)
		s := metricsparity.Scrape(t, ctx, p.httpURL+"/metrics")
		p.Signal(syscall.SIGTERM)
		<-p.Done()
		return s
	}
	got := scrape("metrics-stowage", ours)
	want := scrape("metrics-upstream", upstream)
	o := metricsparity.Sidecar()
	o.ExtraValues = map[string]string{
		// Upstream names its cloning-protection queue "claims" too, so the two queues' series mix.
		"name=clone-sources": "the clone-source protection queue, named apart from the claims queue",
	}
	o.Optional = map[string]string{
		// Either binary may meet a conflict or a not-yet-synced object on the way and count a failed attempt.
		"controller_persistentvolume_delete_failed_total":         "a retried attempt, by timing",
		"controller_persistentvolumeclaim_provision_failed_total": "a retried attempt, by timing",
	}
	o.AbsentValues = map[string]string{
		// Stowage's capacity tracking (provisioner/internal/capacity) runs without work queues.
		"name=csistoragecapacity": "capacity tracking has no work queue",
		"name=csitopology":        "capacity tracking has no work queue",
		// Stowage creates the PV in the claim's own worker and retries there, not in a background queue.
		"name=unsavedpvs": "no background PV save queue",
	}
	metricsparity.Check(t, got, want, o)
}
