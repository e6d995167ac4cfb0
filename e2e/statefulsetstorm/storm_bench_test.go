//go:build bench

package statefulsetstorm_test

import (
	"context"
	"os"
	"testing"

	"github.com/stowage-csi/stowage/e2e/ebsinstall"
	"github.com/stowage-csi/stowage/e2e/images"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/tools"
)

const (
	// replicasEnv sets the StatefulSet's size (default 50).
	replicasEnv = "STOWAGE_STORM_REPLICAS"
	// instanceType is the nodes' EC2 type: 128 EBS attachments per EBS card on EC2 (the root takes one), so
	// 200 replicas fit on two nodes, where the common m5.large's shared 28 would hold 52.
	instanceType = "r8gb.48xlarge"
	// maxReplicas is what two such nodes hold in ec2sim, which counts one card: 127 data volumes each.
	maxReplicas = 2 * 127
)

// auditedResources are the objects a storm writes: the StatefulSet, its Pods (and their bindings), the
// claims, volumes and attachments, the nodes' volume status, and Events. Leases are left out: leader election
// renews them on a clock, whatever the storm does.
var auditedResources = []string{
	"apps/statefulsets", "/pods", "/pods/binding", "/persistentvolumeclaims", "/persistentvolumes",
	"storage.k8s.io/volumeattachments", "/nodes", "/events", "events.k8s.io/events",
}

// column is one way of installing the chart.
type column struct {
	name   string
	values map[string]any
	images []string // more archives for the nodes
}

// upstreamFlags are the qps and burst upstream's chart passes to every sidecar.
func upstreamFlags() map[string]any { return map[string]any{"kubeAPIQPS": "20", "kubeAPIBurst": "100"} }

// columns are Stowage's chart at its defaults; the same chart with each sidecar slot that has an upstream
// binary here on it (the chart then passes upstream's qps and burst), and the resizer, which has none, on
// Stowage's at those flags; and Stowage's images at upstream's flags.
func columns(up []images.UpstreamImage) []column {
	upstream := column{name: "upstream @20/100", values: map[string]any{}}
	sidecars := map[string]any{"resizer": upstreamFlags()}
	slots := map[string]string{"csi-attacher": "attacher", "csi-provisioner": "provisioner", "csi-snapshotter": "snapshotter"}
	for _, u := range up {
		sidecars[slots[u.Name]] = map[string]any{"image": map[string]any{
			"upstream": true, "upstreamRepository": u.Repository, "upstreamTag": u.Tag, "pullPolicy": "Never",
		}}
		upstream.images = append(upstream.images, u.Path)
	}
	upstream.values["sidecars"] = sidecars
	limited := map[string]any{}
	for _, slot := range slots {
		limited[slot] = upstreamFlags()
	}
	limited["resizer"] = upstreamFlags()
	return []column{
		{name: "stowage defaults"},
		upstream,
		{name: "stowage @20/100", values: map[string]any{"sidecars": limited}},
	}
}

// TestBenchStatefulSetStorm runs the storm (runStorm) once per column, each on its own install of the chart on
// the same two real nodes and ec2sim at EC2's delays, and prints the table. It checks that every Pod ran and that nothing was
// left; it asserts nothing about time.
func TestBenchStatefulSetStorm(t *testing.T) {
	n := rig.EnvCount(t, replicasEnv, 50)
	if n > maxReplicas {
		t.Fatalf("%s=%d: two %s nodes hold %d volumes", replicasEnv, n, instanceType, maxReplicas)
	}
	ctx := context.Background()
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	up, err := images.Upstream(ctx, tools.CacheDir(root), "csi-attacher", "csi-provisioner", "csi-snapshotter")
	if err != nil {
		t.Fatal(err)
	}
	mkfs := mkfsTime(t, ctx)
	cols := columns(up)
	audit, err := rig.NewAuditLog(t.TempDir(), auditedResources...)
	if err != nil {
		t.Fatal(err)
	}
	var extra []string
	for _, c := range cols {
		extra = append(extra, c.images...)
	}
	// One cluster for every column: the machine runs one with real nodes at a time, and other suites take
	// turns with it, so a cluster per column would wait for theirs between columns.
	s := ebsinstall.ForTest(t, ebsinstall.Options{
		Values: cols[0].values, ExtraImages: extra, TimeScale: 1, InstanceType: instanceType,
		APIServerArgs: audit.APIServerArgs(),
	})
	if err := createStorageClass(ctx, s.Cluster.Client()); err != nil {
		t.Fatal(err)
	}
	var rs []result
	for i, c := range cols {
		// A column that failed may leave its objects behind, which the next would count.
		if !t.Run(c.name, func(t *testing.T) {
			if i > 0 {
				if err := s.Reinstall(ctx, c.values); err != nil {
					t.Fatal(err)
				}
			}
			rs = append(rs, runStorm(t, ctx, s, audit, c.name, n))
		}) {
			break
		}
	}
	if len(rs) != len(cols) {
		t.Fatalf("%d of %d columns ran", len(rs), len(cols))
	}
	writeTable(os.Stdout, n, rs, newFloor(mkfs, rs[0].sched))
}
