//go:build tools

// Package tools pins upstream's snapshot-controller and csi-snapshotter
// (github.com/kubernetes-csi/external-snapshotter/v8 v8.7.0), the real peers the e2e cross-runs and benchmarks
// compare Stowage's snapshotter binaries with. The rig builds them with GOWORK=off into the git-ignored cache; no
// Stowage code imports them.
package tools

import (
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter"
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller"
)
