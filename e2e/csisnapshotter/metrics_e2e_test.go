//go:build e2e

package csisnapshotter

import (
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/stowage-csi/stowage/e2e/metricsparity"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// TestE2ECSISnapshotterMetricsParity runs Stowage's csi-snapshotter and upstream's, each on a driver of its
// own, through one snapshot content made and deleted, and requires the same metrics on --http-endpoint:
// families, label names, histogram buckets, queue and lease names, the CSI methods called.
func TestE2ECSISnapshotterMetricsParity(t *testing.T) {
	upstream := sidecarrig.Upstream(t, sidecarrig.CSISnapshotter())
	r := startRig(t)
	f := newFixture(t, r, 3*time.Minute)
	scrape := func(name, path string) metricsparity.Shape {
		drv := startDriver(t, name+".csi.stowage.io")
		f.createClass(newClass(name, drv.Name()))
		vol := drv.AddVolume("pv-"+name, 1<<30)
		addr := e2erig.FreeAddr(t)
		r.startBinary(t, path, "snapshotter-"+name, drv.Endpoint(), "--http-endpoint="+addr)
		c := f.createContent(newContent(name, drv.Name(), name, vol.ID, snapv1.VolumeSnapshotContentDelete))
		f.waitReady(c.Name)
		f.release(c.Name)
		f.waitGone(c.Name)
		return metricsparity.Scrape(t, f.ctx, "http://"+addr+"/metrics")
	}
	got := scrape("metrics-stowage", "")
	want := scrape("metrics-upstream", upstream)
	o := metricsparity.Sidecar()
	// The driver has no GroupController service. Stowage reads that from GetPluginCapabilities and neither
	// calls GroupControllerGetCapabilities nor makes the group content queue; upstream calls it (Unimplemented)
	// and makes the queue, which stays idle.
	o.ExtraValues = map[string]string{"method_name=/csi.v1.Identity/GetPluginCapabilities": "asked instead of calling the group service blindly"}
	o.AbsentValues = map[string]string{
		"method_name=/csi.v1.GroupController/GroupControllerGetCapabilities": "not called without a group service",
		"grpc_status_code=Unimplemented":                                     "the answer to that call",
		"name=csi-snapshotter-groupsnapshotcontent":                          "the queue exists only when group snapshots are served",
	}
	metricsparity.Check(t, got, want, o)
}
