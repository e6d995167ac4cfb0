// Package provision turns PersistentVolumeClaims into CSI volumes and PersistentVolumes, and deletes them again.
// It holds the per-object logic; internal/controller feeds it from informers and work queues.
package provision

// Names shared with upstream external-provisioner and the Kubernetes PV controller: objects written by either
// carry them, so a change would orphan those objects or let two provisioners act on one claim.
const (
	annStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	annBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	annSelectedNode           = "volume.kubernetes.io/selected-node"
	annProvisionedBy          = "pv.kubernetes.io/provisioned-by"
	annDeletionSecretName     = "volume.kubernetes.io/provisioner-deletion-secret-name"
	annDeletionSecretNS       = "volume.kubernetes.io/provisioner-deletion-secret-namespace"
	annModifySecretName       = "volume.kubernetes.io/controller-modify-secret-name"
	annModifySecretNS         = "volume.kubernetes.io/controller-modify-secret-namespace"
	annAllowVolumeModeChange  = "snapshot.storage.kubernetes.io/allow-volume-mode-change"

	// VolumeFinalizer keeps a provisioned PV until its volume is deleted.
	VolumeFinalizer = "external-provisioner.volume.kubernetes.io/finalizer"
	// CloneFinalizer keeps a clone's source PVC while a clone of it is being provisioned.
	CloneFinalizer = "provisioner.storage.kubernetes.io/cloning-protection"
	// SnapshotSourceFinalizer keeps a VolumeSnapshot while a volume is being restored from it. It is upstream's
	// own name (external-provisioner v6.2+), so Stowage removes what an upstream provisioner put on a snapshot for
	// a restore it then finishes, and upstream removes Stowage's. It is not the snapshot-controller's similarly
	// named snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection, which that controller manages.
	SnapshotSourceFinalizer = "provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection"

	provisionerIdentityKey = "storage.kubernetes.io/csiProvisionerIdentity"
)

// IntentKey is the PVC finalizer and annotation (the CSI volume name) Stowage wrote before its first CreateVolume
// until the journal (journal.go) replaced them: a volume may exist that no PV records yet, so the claim
// could not go before the provisioner had created the PV or deleted that volume (upstream keeps this in memory and
// leaks on restart, kubernetes-csi/external-provisioner#486). Never written now; still read and released, so the
// claims an older Stowage was provisioning when it was upgraded are finished or undone.
const IntentKey = "provisioner.stowage-csi.io/volume-being-created"

// Event reasons, as upstream emits them.
const (
	ReasonProvisioning          = "Provisioning"
	ReasonProvisioningSucceeded = "ProvisioningSucceeded"
	ReasonProvisioningFailed    = "ProvisioningFailed"
	ReasonExternalProvisioning  = "ExternalProvisioning"
	ReasonVolumeFailedDelete    = "VolumeFailedDelete"
)
