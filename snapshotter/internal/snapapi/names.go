// Package snapapi holds the names both snapshotter binaries share with upstream's external-snapshotter: the
// finalizers, annotations, labels and parameter keys that live on the snapshot objects. A cluster may run
// one half from upstream and the other from Stowage, so every string here must match upstream exactly.
package snapapi

import (
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
)

// Finalizers (external-snapshotter pkg/utils/util.go).
const (
	// ContentBoundFinalizer keeps a VolumeSnapshotContent until the snapshot behind it is deleted or retained.
	ContentBoundFinalizer = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
	// SnapshotBoundFinalizer keeps a VolumeSnapshot while it is bound to a content.
	SnapshotBoundFinalizer = "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"
	// SnapshotAsSourceFinalizer keeps a VolumeSnapshot while it is being created or restored from.
	SnapshotAsSourceFinalizer = "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection"
	// SnapshotInGroupFinalizer keeps a VolumeSnapshot that is a member of a group snapshot.
	SnapshotInGroupFinalizer = "snapshot.storage.kubernetes.io/volumesnapshot-in-group-protection"
	// PVCAsSourceFinalizer keeps a PVC while a snapshot of it is being taken.
	PVCAsSourceFinalizer = "snapshot.storage.kubernetes.io/pvc-as-source-protection"
	// GroupContentBoundFinalizer and GroupSnapshotBoundFinalizer are the group snapshot analogues.
	GroupContentBoundFinalizer  = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshotcontent-bound-protection"
	GroupSnapshotBoundFinalizer = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-bound-protection"
)

// Annotations and labels.
const (
	// AnnBeingCreated is set on a content before CreateSnapshot and removed on success or a final error, so a
	// timeout or a restart is remembered as "maybe in progress", never forgotten.
	AnnBeingCreated = "snapshot.storage.kubernetes.io/volumesnapshot-being-created"
	// AnnGroupBeingCreated is AnnBeingCreated for VolumeGroupSnapshotContents.
	AnnGroupBeingCreated = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-created"
	// AnnBeingDeleted tells csi-snapshotter the snapshot controller wants the content's snapshot deleted.
	AnnBeingDeleted = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"
	// AnnGroupBeingDeleted is AnnBeingDeleted for group contents.
	AnnGroupBeingDeleted = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-deleted"
	// AnnDeletionSecretName and AnnDeletionSecretNamespace carry the class's snapshotter secret onto the
	// content, so DeleteSnapshot still has it after the class is gone.
	AnnDeletionSecretName      = "snapshot.storage.kubernetes.io/deletion-secret-name"
	AnnDeletionSecretNamespace = "snapshot.storage.kubernetes.io/deletion-secret-namespace"
	// AnnGroupDeletionSecretName and AnnGroupDeletionSecretNamespace are the group analogues.
	AnnGroupDeletionSecretName      = "groupsnapshot.storage.kubernetes.io/deletion-secret-name"
	AnnGroupDeletionSecretNamespace = "groupsnapshot.storage.kubernetes.io/deletion-secret-namespace"
	// AnnDefaultClass marks the VolumeSnapshotClass used when a VolumeSnapshot names none.
	AnnDefaultClass = "snapshot.storage.kubernetes.io/is-default-class"
	// AnnGroupDefaultClass marks the default VolumeGroupSnapshotClass.
	AnnGroupDefaultClass = "groupsnapshot.storage.kubernetes.io/is-default-class"
	// LabelManagedBy names the node whose csi-snapshotter handles a content (distributed snapshotting).
	LabelManagedBy = "snapshot.storage.kubernetes.io/managed-by"
	// AnnGroupHandle on a member content names its group's handle, so csi-snapshotter does not call
	// CreateSnapshot for it. Its domain is groupsnapshot.storage.k8s.io, unlike the other group keys' (upstream's
	// own spelling): the other half of a mixed pair reads exactly this key.
	AnnGroupHandle = "groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle"
)

// Parameter keys of a VolumeSnapshotClass (prefix csi.storage.k8s.io/), and the extra metadata keys
// csi-snapshotter passes with --extra-create-metadata.
const (
	ParamPrefix                          = "csi.storage.k8s.io/"
	ParamSnapshotterSecretName           = "csi.storage.k8s.io/snapshotter-secret-name"
	ParamSnapshotterSecretNamespace      = "csi.storage.k8s.io/snapshotter-secret-namespace"
	ParamSnapshotterListSecretName       = "csi.storage.k8s.io/snapshotter-list-secret-name"
	ParamSnapshotterListSecretNamespace  = "csi.storage.k8s.io/snapshotter-list-secret-namespace"
	ParamGroupSnapshotterSecretName      = "csi.storage.k8s.io/group-snapshotter-secret-name"
	ParamGroupSnapshotterSecretNamespace = "csi.storage.k8s.io/group-snapshotter-secret-namespace"
	ParamGroupGetSecretName              = "csi.storage.k8s.io/group-snapshotter-get-secret-name"
	ParamGroupGetSecretNamespace         = "csi.storage.k8s.io/group-snapshotter-get-secret-namespace"

	MetaSnapshotName      = "csi.storage.k8s.io/volumesnapshot/name"
	MetaSnapshotNamespace = "csi.storage.k8s.io/volumesnapshot/namespace"
	MetaContentName       = "csi.storage.k8s.io/volumesnapshotcontent/name"
	MetaGroupSnapshotName = "csi.storage.k8s.io/volumegroupsnapshot/name"
	MetaGroupSnapshotNS   = "csi.storage.k8s.io/volumegroupsnapshot/namespace"
	MetaGroupContentName  = "csi.storage.k8s.io/volumegroupsnapshotcontent/name"
)

// IsDeletionCandidate reports whether a content's snapshot should be deleted: the content is being deleted,
// its policy is Delete, and the snapshot controller (or a user deleting the content) has let it go.
func IsDeletionCandidate(c *snapv1.VolumeSnapshotContent) bool {
	return c.DeletionTimestamp != nil && c.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete
}
