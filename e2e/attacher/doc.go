// Package attacher holds the end-to-end tests (build tag e2e) and the benchmark (build tag bench) of
// Stowage's csi-attacher: the real binary, run as its own process under its own ServiceAccount with the
// RBAC from deploy/rbac, against a real control plane (package sidecarrig) and a CSI driver on a real unix
// socket (package csimock). API writes are counted on the server side, from kube-apiserver's audit log.
// That nothing more was written is shown with a sentinel, not by waiting: after the event under test, the
// test attaches one more volume and reads the log once the attacher's write for it is there; the attacher
// runs with one worker per queue, so by then it has handled everything queued before. The objects the
// tests create are built in fixtures_test.go.
package attacher
