// Package rig holds the small pieces every end-to-end harness in this module needs: finding the repository,
// building one of its binaries, serialising builds into a shared cache with a file lock, and running a child
// process that cannot outlive the test, waiting for a condition (Eventually), and reading kube-apiserver's
// audit log back (AuditLog), measuring the API server's own write limit (MeasureWriteLimit) and printing a
// storm benchmark's table against it (WriteStormTable).
package rig
