package s3api

// Names the S3 driver's components agree on, with upstream's values.
const (
	// DriverName is the CSI driver's name.
	DriverName = "s3.csi.aws.com"
	// DefaultMountpointNamespace is where Mountpoint Pods run (upstream's chart value).
	DefaultMountpointNamespace = "mount-s3"

	// Spec field names the controller indexes and the node filters on.
	FieldNodeName             = "spec.nodeName"
	FieldPersistentVolumeName = "spec.persistentVolumeName"
	FieldVolumeID             = "spec.volumeID"
	FieldMountOptions         = "spec.mountOptions"
	FieldAuthenticationSource = "spec.authenticationSource"
	FieldWorkloadFSGroup      = "spec.workloadFSGroup"
	FieldWorkloadSA           = "spec.workloadServiceAccountName"
	FieldWorkloadNamespace    = "spec.workloadNamespace"
	FieldWorkloadRoleARN      = "spec.workloadServiceAccountIAMRoleARN"

	// LabelCreatedByVersion is set on attachments: the controller version that created it.
	LabelCreatedByVersion = "s3.csi.aws.com/created-by-csi-driver-version"
	// LabelMountpointVersion is set on Mountpoint Pods: the Mountpoint version they run.
	LabelMountpointVersion = "s3.csi.aws.com/mountpoint-version"
	// LabelMountedByVersion is set on Mountpoint Pods: the controller version that created them; only Pods
	// of the running controller's version take new workloads, so an upgrade moves new workloads to new Pods.
	LabelMountedByVersion = "s3.csi.aws.com/mounted-by-csi-driver-version"

	// AnnotationVolumeName and AnnotationVolumeID are set on Mountpoint Pods: the PV and its volume handle.
	AnnotationVolumeName = "s3.csi.aws.com/volume-name"
	AnnotationVolumeID   = "s3.csi.aws.com/volume-id"
	// AnnotationNeedsUnmount is set to "true" by the controller on a Mountpoint Pod that serves no workload
	// any more: the node plugin then unmounts it and ends it through mount.exit.
	AnnotationNeedsUnmount = "s3.csi.aws.com/needs-unmount"
	// AnnotationNoNewWorkload is set to "true" on a Mountpoint Pod that must not take new workloads.
	AnnotationNoNewWorkload = "s3.csi.aws.com/no-new-workload"
	// AnnotationDaemonSetPod lets the cluster autoscaler drain a node with Mountpoint Pods on it.
	AnnotationDaemonSetPod = "cluster-autoscaler.kubernetes.io/daemonset-pod"

	// TaintAgentNotReady is the startup taint the node plugin removes once it is registered.
	TaintAgentNotReady = "s3.csi.aws.com/agent-not-ready"

	// Authentication sources (volume attribute authenticationSource).
	AuthenticationSourceDriver = "driver"
	AuthenticationSourcePod    = "pod"

	// CommVolumeName is the Mountpoint Pod's emptyDir the node and the mounter talk through, mounted at
	// CommDir in the Pod.
	CommVolumeName = "comm"
	CommDir        = "/comm"
	// CacheVolumeName is the Mountpoint Pod's local cache volume, mounted at CacheDir.
	CacheVolumeName = "local-cache"
	CacheDir        = "/local-cache"
	// MountpointContainerName is the Mountpoint Pod's only container.
	MountpointContainerName = "mountpoint"
)
