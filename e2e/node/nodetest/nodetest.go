// Package nodetest starts a control plane with real nodes (package node) for one test, in one line.
package nodetest

import (
	"context"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/images"
	"github.com/stowage-csi/stowage/e2e/node"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/tools"
)

// startTimeout covers cold builds of the control plane, the kubelet and containerd (tens of minutes on 2
// cores, once per machine) plus the start itself.
const startTimeout = 50 * time.Minute

// cleanupMargin is left before the test binary's deadline so a start that runs out of time fails with its
// own error and the teardown still runs.
const cleanupMargin = time.Minute

// TwoZones is the default layout: two nodes in two zones, so that a volume can move between nodes and zones.
func TwoZones() []node.Spec {
	return []node.Spec{{Name: "node-a", Zone: "zone-a"}, {Name: "node-b", Zone: "zone-b"}}
}

// Start starts a cluster with the given nodes, the pause and busybox images imported into each, plus
// extraImages; it tears everything down when t ends, logging the nodes' log tails first if t failed.
func Start(t testing.TB, nodes []node.Spec, extraImages ...string) *node.Cluster {
	t.Helper()
	return StartWith(t, node.ClusterOptions{Nodes: nodes}, extraImages...)
}

// StartWith is Start with the cluster's options: a control plane with flags of its own (an audit log) among
// them. Its Images are imported besides the test images and extraImages.
func StartWith(t testing.TB, o node.ClusterOptions, extraImages ...string) *node.Cluster {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), rig.StartDeadline(t, startTimeout, cleanupMargin))
	defer cancel()
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	archives, err := images.TestImages(ctx, images.TestOptions{CacheDir: tools.CacheDir(root), RepoRoot: root})
	if err != nil {
		t.Fatalf("assemble the test images: %v", err)
	}
	paths := append(append([]string{}, o.Images...), extraImages...)
	for _, a := range archives {
		paths = append(paths, a.Path)
	}
	o.Images = paths
	c, err := node.StartCluster(ctx, o)
	if err != nil {
		t.Fatalf("start cluster with real nodes: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane logs:\n%s", c.LogTail(30))
			t.Logf("node logs:\n%s", c.NodeLogTail(40))
		}
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("tear down: %v", err)
		}
	})
	return c
}
