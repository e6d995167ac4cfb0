//go:build e2e

package snapshotcontroller

import (
	"context"
	"testing"
)

// TestE2ESnapshotterGroupsCrossRun takes a group snapshot through its life (groupLifecycle) with each Stowage
// binary paired with upstream's other half (external-snapshotter, built from e2e/tools): upstream's
// snapshot-controller with Stowage's csi-snapshotter, then Stowage's snapshot-controller with upstream's
// csi-snapshotter. The two halves meet only in the objects: the group content's status, the member contents'
// handle annotation and status, the members' owner reference and finalizers. Each pair has its own driver
// (and so its own default group class).
func TestE2ESnapshotterGroupsCrossRun(t *testing.T) {
	r := startRig(t, true)
	stowage, upstream := stowageBinaries(t), upstreamBinaries(t)
	pairs := []struct {
		name, suffix            string
		controller, snapshotter string
	}{
		{"upstream snapshot-controller, Stowage csi-snapshotter", "us", upstream.controller, stowage.snapshotter},
		{"Stowage snapshot-controller, upstream csi-snapshotter", "su", stowage.controller, upstream.snapshotter},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			drv := startGroupDriver(t, "group-"+p.suffix+".csi.example.com")
			r.startController(t, "snapshot-controller-"+p.suffix, p.controller)
			r.startSnapshotter(t, "csi-snapshotter-"+p.suffix, p.snapshotter, drv.Endpoint(), "--feature-gates=CSIVolumeGroupSnapshot=true")
			groupLifecycle(fixture{t: t, ctx: context.Background(), r: r, drv: drv}, "grp-"+p.suffix)
		})
	}
}
