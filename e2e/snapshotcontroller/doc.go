// Package snapshotcontroller tests Stowage's snapshot-controller, with Stowage's csi-snapshotter beside it, on
// the sidecar rig (a real kube-apiserver and kube-controller-manager, the mock CSI driver, the VolumeSnapshot
// CRDs), each under its upstream RBAC from deploy/rbac, and paired with upstream's other half in both
// combinations. It also checks that deploy/crds holds the client module's CRDs byte for byte. The sidecar alone
// is tested in e2e/csisnapshotter.
package snapshotcontroller
