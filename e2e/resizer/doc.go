// Package resizer holds the end-to-end tests (build tag e2e) and the benchmark (build tag bench) of Stowage's
// csi-resizer: the real binary, started with exactly the args of aws-ebs-csi-driver's manifest, as its own
// process under the ServiceAccount and RBAC of deploy/rbac/csi-resizer.yaml, against a real control plane
// (package sidecarrig, whose kube-controller-manager binds the claims and runs its expand controller) and a CSI
// driver on a real unix socket (package csimock). API writes are counted on the server side, from
// kube-apiserver's audit log.
package resizer
