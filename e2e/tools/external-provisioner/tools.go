//go:build tools

// Package tools pins upstream's csi-provisioner (github.com/kubernetes-csi/external-provisioner/v6 v6.4.0), the real peer the e2e cross-runs and benchmarks compare Stowage's
// csi-provisioner with. The rig builds it with GOWORK=off into the git-ignored cache; no Stowage code imports it.
package tools

import _ "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"
