// Package clustertest starts a control plane (package cluster) for one test, in one line.
package clustertest

import (
	"context"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/cluster"
	"github.com/stowage-csi/stowage/e2e/rig"
)

// startTimeout covers a cold build of the binaries (minutes on 2 cores) plus the start itself.
const startTimeout = 40 * time.Minute

// cleanupMargin is left before the test binary's deadline so a start that runs out of time fails with
// its own error, and Stop still runs, instead of the test binary panicking.
const cleanupMargin = 30 * time.Second

// Start starts a control plane for t and stops it when t ends. If t failed, the tail of each component's
// log is logged first. Call it only from e2e tests (files behind the e2e build tag).
func Start(t testing.TB) *cluster.Cluster {
	t.Helper()
	return StartWith(t, cluster.Options{})
}

// StartWith is Start with options, e.g. extra kube-apiserver flags for an audit log.
func StartWith(t testing.TB, opts cluster.Options) *cluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), rig.StartDeadline(t, startTimeout, cleanupMargin))
	defer cancel()
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane logs:\n%s", c.LogTail(30))
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return c
}
