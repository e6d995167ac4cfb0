// Package csisnapshotter holds the end-to-end tests (build tag e2e) of Stowage's csi-snapshotter: the real
// binary, run as its own process under its own ServiceAccount with exactly the RBAC of
// deploy/rbac/csi-snapshotter.yaml and upstream's manifest arguments, against a real control plane with the
// snapshot CRDs (package cluster) and a CSI driver on a real unix socket (package csimock). The tests play
// the snapshot controller's part by hand: they create VolumeSnapshotContents bound to a VolumeSnapshot UID,
// and release them with the being-deleted annotation before deleting them. API writes are counted on the
// server side, from kube-apiserver's audit log.
package csisnapshotter
