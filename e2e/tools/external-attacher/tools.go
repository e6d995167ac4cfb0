//go:build tools

// Package tools pins upstream's csi-attacher (github.com/kubernetes-csi/external-attacher/v4 v4.13.0), the real peer the e2e cross-runs and benchmarks compare Stowage's
// csi-attacher with. The rig builds it with GOWORK=off into the git-ignored cache; no Stowage code imports it.
package tools

import _ "github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher"
