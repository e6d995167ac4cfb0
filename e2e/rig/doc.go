// Package rig holds the small pieces every end-to-end harness in this module needs: finding the repository,
// building one of its binaries, serialising builds into a shared cache with a file lock, and running a child
// process that cannot outlive the test, waiting for a condition (Eventually), and reading kube-apiserver's
// audit log back (AuditLog).
package rig
