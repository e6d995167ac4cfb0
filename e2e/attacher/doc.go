// Package attacher holds the end-to-end tests (build tag e2e) and the benchmark (build tag bench) of
// Stowage's csi-attacher: the real binary, run as its own process under its own ServiceAccount with the
// RBAC from deploy/rbac, against a real control plane (package cluster) and a CSI driver on a real unix
// socket (package csimock). API writes are counted on the server side, from kube-apiserver's audit log.
package attacher
