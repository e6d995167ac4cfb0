// Package snapshotter tests Stowage's snapshot-controller and csi-snapshotter together on the rig (a real
// kube-apiserver and kube-controller-manager, the mock CSI driver, the VolumeSnapshot CRDs), each under its
// upstream RBAC from deploy/rbac, and paired with upstream's other half in both combinations. It also checks
// that deploy/crds holds the client module's CRDs byte for byte.
package snapshotcontroller
