//go:build e2e

package resizer

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// TestE2EResizerDriverRestart kills the CSI driver under csi-resizer while its ControllerExpandVolume is in
// flight and serves it again on the same socket: the resizer, which retries failures only after an hour here,
// finishes the expansion on the restarted driver as soon as it is back, since it follows the driver's restart
// (csiconn.FollowRestarts) and retries the work the restart interrupted, and it keeps running.
func TestE2EResizerDriverRestart(t *testing.T) {
	r := startRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns = "default"
	f := newFixture(t, ctx, r.Client, "resize-restart")
	d := e2erig.StartRestartingDriver(t, ctx, csimock.Options{Name: f.driver, ControllerCaps: csimock.ControllerCapsWithModify()})
	f.drv = d.Driver
	// A raw block volume: the resizer alone finishes its expansion, no kubelet needed.
	vol, _ := f.boundBlockClaim(t, ns, "regrow")
	d.Hold(csimock.ControllerExpandVolume)
	resizer := r.startResizer(t, "csi-resizer", d.Endpoint(), slices.Concat(upstreamArgs, e2erig.HourBackoff)...)
	f.request(t, ns, "regrow", "2Gi")

	second, back := d.KillDuring(t, csimock.ControllerExpandVolume, vol)
	f.drv = second
	pvc := f.waitClaim(t, ns, "regrow", "expanded to 2Gi", func(c *corev1.PersistentVolumeClaim) bool { return storage(c.Status.Capacity) == "2Gi" })
	t.Logf("expanded %.2fs after the driver was back (backoff 1h)", time.Since(back).Seconds())
	if _, ok := pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage]; ok {
		t.Errorf("resize status = %v, want none once expanded", pvc.Status.AllocatedResourceStatuses)
	}
	f.waitPV(t, "regrow", "at 2Gi", func(pv *corev1.PersistentVolume) bool { return storage(pv.Spec.Capacity) == "2Gi" })
	if got := driverVolume(t, second, vol.ID).CapacityBytes; got != 2<<30 {
		t.Errorf("the restarted driver's volume size = %d, want 2Gi", got)
	}
	if n := second.CallsFor(csimock.ControllerExpandVolume, vol.ID); n != 1 {
		t.Errorf("ControllerExpandVolume calls on the restarted driver = %d, want 1", n)
	}
	e2erig.CheckFollowed(t, resizer)
}
