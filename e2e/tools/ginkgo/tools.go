//go:build tools

// Package tools pins Ginkgo's command line (github.com/onsi/ginkgo/v2 v2.28.1, the version Kubernetes' pin in
// ../kube requires), which runs the compiled e2e.test in parallel processes as Kubernetes' own CI does. The rig
// builds it with GOWORK=off into the git-ignored cache; no Stowage code imports it.
package tools

import _ "github.com/onsi/ginkgo/v2/ginkgo"
