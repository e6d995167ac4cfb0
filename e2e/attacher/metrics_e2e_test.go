//go:build e2e

package attacher

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/metricsparity"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// TestE2EAttacherMetricsParity runs Stowage's csi-attacher and upstream's, each on a driver of its own, through
// one attach and detach, and requires the same metrics on --http-endpoint: families, label names, histogram
// buckets, queue and lease names and the CSI methods called, so upstream's dashboards and alerts keep working.
func TestE2EAttacherMetricsParity(t *testing.T) {
	r := startRig(t)
	upstream := sidecarrig.Upstream(t, sidecarrig.Attacher())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	scrape := func(name, path string) metricsparity.Shape {
		f := newFixture(t, ctx, r, name)
		addr := e2erig.FreeAddr(t)
		r.startBinary(t, path, name, f.drv.Endpoint(), "--http-endpoint="+addr)
		_, pv := f.volume("pv-"+name, nil)
		f.attachment("va-"+name, pv.Name, nil)
		f.waitAttached("va-" + name)
		if err := f.client.StorageV1().VolumeAttachments().Delete(ctx, "va-"+name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		f.waitVAGone("va-" + name)
		return metricsparity.Scrape(t, ctx, "http://"+addr+"/metrics")
	}
	got := scrape("metrics-stowage", r.binary)
	want := scrape("metrics-upstream", upstream)
	metricsparity.Check(t, got, want, metricsparity.Sidecar())
}
