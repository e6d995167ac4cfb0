package params

// StorageClass parameter keys, lowercased: upstream lowercases keys before matching them.
const (
	KeyFsType                        = "csi.storage.k8s.io/fstype"
	KeyFsTypeDeprecated              = "fstype"
	KeyVolumeType                    = "type"
	KeyIOPSPerGB                     = "iopspergb"
	KeyAllowAutoIOPSPerGBIncrease    = "allowautoiopspergbincrease"
	KeyAllowAutoIOPSIncreaseOnModify = "allowautoiopsincreaseonmodify"
	KeyIOPS                          = "iops"
	KeyThroughput                    = "throughput"
	KeyEncrypted                     = "encrypted"
	KeyKMSKeyID                      = "kmskeyid"
	KeyBlockExpress                  = "blockexpress"
	KeyVolumeInitializationRate      = "volumeinitializationrate"
	KeyBlockAttachUntilInitialized   = "blockattachuntilinitialized"
	KeyBlockSize                     = "blocksize"
	KeyInodeSize                     = "inodesize"
	KeyBytesPerInode                 = "bytesperinode"
	KeyNumberOfInodes                = "numberofinodes"
	KeyExt4BigAlloc                  = "ext4bigalloc"
	KeyExt4ClusterSize               = "ext4clustersize"
	KeyExt4EncryptionSupport         = "ext4encryptionsupport"
	KeyPVCName                       = "csi.storage.k8s.io/pvc/name"
	KeyPVCNamespace                  = "csi.storage.k8s.io/pvc/namespace"
	KeyPVName                        = "csi.storage.k8s.io/pv/name"

	// TagSpecificationPrefix is matched case-sensitively on the raw key, as upstream does.
	TagSpecificationPrefix = "tagSpecification"
	// TagDeletionPrefix (VolumeAttributesClass only) names tag keys to remove.
	TagDeletionPrefix = "tagDeletion"

	// VolumeSnapshotClass keys.
	KeyFSRZones                = "fastsnapshotrestoreavailabilityzones"
	KeyOutpostARN              = "outpostarn"
	KeyLockMode                = "lockmode"
	KeyLockDuration            = "lockduration"
	KeyLockExpirationDate      = "lockexpirationdate"
	KeyLockCoolOffPeriod       = "lockcooloffperiod"
	KeyVolumeSnapshotName      = "csi.storage.k8s.io/volumesnapshot/name"
	KeyVolumeSnapshotNamespace = "csi.storage.k8s.io/volumesnapshot/namespace"
	KeyVolumeSnapshotContent   = "csi.storage.k8s.io/volumesnapshotcontent/name"
)

// Volume types EC2 accepts.
const (
	VolumeTypeGP2      = "gp2"
	VolumeTypeGP3      = "gp3"
	VolumeTypeIO1      = "io1"
	VolumeTypeIO2      = "io2"
	VolumeTypeSC1      = "sc1"
	VolumeTypeST1      = "st1"
	VolumeTypeStandard = "standard"

	DefaultVolumeType = VolumeTypeGP3
	DefaultFsType     = "ext4"
)

var volumeTypes = map[string]bool{
	VolumeTypeGP2: true, VolumeTypeGP3: true, VolumeTypeIO1: true, VolumeTypeIO2: true,
	VolumeTypeSC1: true, VolumeTypeST1: true, VolumeTypeStandard: true,
}

// Volume context keys the controller hands to the node (upstream's names, so volumes created by the upstream
// controller stage on Stowage's node plugin and vice versa).
const (
	ContextBlockSize             = "blocksize"
	ContextInodeSize             = "inodesize"
	ContextBytesPerInode         = "bytesperinode"
	ContextNumberOfInodes        = "numberofinodes"
	ContextExt4BigAlloc          = "ext4bigalloc"
	ContextExt4ClusterSize       = "ext4clustersize"
	ContextExt4EncryptionSupport = "ext4encryptionsupport"
)

// Reserved tag keys: the driver owns them; users may neither set nor delete them.
const (
	TagCSIVolumeName         = "CSIVolumeName"
	TagCSIVolumeSnapshotName = "CSIVolumeSnapshotName"
	TagClusterName           = "ebs.csi.aws.com/cluster-name"
	TagCluster               = "ebs.csi.aws.com/cluster"
	TagIOPSPerGB             = "ebs.csi.aws.com/IOPSPerGb"
	TagAllowIOPSIncrease     = "ebs.csi.aws.com/AllowAutoIOPSIncreaseOnModify"
	TagPVCName               = "kubernetes.io/created-for/pvc/name"
	TagPVCNamespace          = "kubernetes.io/created-for/pvc/namespace"
	TagPVName                = "kubernetes.io/created-for/pv/name"
)
