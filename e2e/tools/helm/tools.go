//go:build tools

// Package tools pins Helm's command line (helm.sh/helm/v3), which the e2e tests install Stowage's charts
// with on the rig's real nodes, as users do. The rig builds it with GOWORK=off into the git-ignored cache; no
// Stowage code imports it.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
