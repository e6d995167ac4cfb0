//go:build e2e

package csisnapshotter

import (
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// managedBy is the label the snapshot controller puts on a content with --enable-distributed-snapshotting,
// naming the node whose csi-snapshotter serves it (upstream's pkg/utils).
const managedBy = "snapshot.storage.kubernetes.io/managed-by"

// testNodeDeployment runs csi-snapshotter as upstream's node deployment does: --node-deployment with
// NODE_NAME, no leader election, one worker. It takes the snapshot of the content labelled for its node and
// never touches the one labelled for another node: that one was created first, so with one worker a
// sidecar that saw it would have written to it before it finished the sentinel created after it.
func testNodeDeployment(t *testing.T, r rig) {
	f := newFixture(t, r, 5*time.Minute)
	drv := startDriver(t, "node.csi.stowage.io")
	f.createClass(newClass("node", drv.Name()))
	vol := drv.AddVolume("pv-node", 1<<30)
	r.Start(t, sidecarrig.CSISnapshotter(), sidecarrig.Run{Name: "snapshotter-node", Endpoint: drv.Endpoint(),
		Args: []string{"--node-deployment", "--worker-threads=1", "--v=2"}, Env: []string{"NODE_NAME=node-a"}})

	labelled := func(name, node string) *snapv1.VolumeSnapshotContent {
		c := newContent(name, drv.Name(), "node", vol.ID, snapv1.VolumeSnapshotContentDelete)
		c.Labels = map[string]string{managedBy: node}
		return f.createContent(c)
	}
	other := labelled("node-b-content", "node-b")
	mine := labelled("node-a-content", "node-a")
	f.waitReady(mine.Name)
	if got, err := f.get(other.Name); err != nil || got.Status != nil || len(got.Annotations) != 0 {
		t.Errorf("content of node-b = %+v (%v), want it untouched", got, err)
	}
	if writes := r.contentWrites(t, other.Name); len(writes) != 0 {
		t.Errorf("writes to node-b's content: %q, want none", writes)
	}
	if n := len(drv.Snapshots()); n != 1 {
		t.Errorf("driver holds %d snapshots, want 1 (node-a's)", n)
	}
	f.release(mine.Name)
	f.waitGone(mine.Name)
}
