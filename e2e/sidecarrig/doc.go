// Package sidecarrig is the rig of the sidecars' end-to-end tests: a control plane with an audit log, each
// sidecar's RBAC exactly as deploy/rbac grants it (upstream's manifests), a kubeconfig of its ServiceAccount,
// and the sidecar as a process of its own, Stowage's binary (built once per test binary by Main) or upstream's
// peer (built and cached by e2e/tools), killed when its test ends.
package sidecarrig
