package s3api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group, Version and Resource of the CRD, as upstream registers them.
const (
	Group    = "s3.csi.aws.com"
	Version  = "v2"
	Kind     = "MountpointS3PodAttachment"
	Resource = "mountpoints3podattachments"
	// CRDName is the CustomResourceDefinition's metadata.name.
	CRDName = Resource + "." + Group
)

// SchemeGroupVersion is s3.csi.aws.com/v2.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// GroupVersionResource of MountpointS3PodAttachments, for dynamic clients and informers.
func GroupVersionResource() schema.GroupVersionResource {
	return SchemeGroupVersion.WithResource(Resource)
}

// AddToScheme registers the attachment types in a scheme (controller-runtime clients, fake clients).
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &MountpointS3PodAttachment{}, &MountpointS3PodAttachmentList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// MountpointS3PodAttachment records which workload Pods on a node use which Mountpoint Pod for one volume
// with one set of sharing-relevant settings (the spec fields other than the map are the sharing key).
type MountpointS3PodAttachment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MountpointS3PodAttachmentSpec   `json:"spec,omitempty"`
	Status MountpointS3PodAttachmentStatus `json:"status,omitempty"`
}

// MountpointS3PodAttachmentSpec is upstream's spec, field for field.
type MountpointS3PodAttachmentSpec struct {
	// NodeName is the node of the workloads and of their Mountpoint Pods.
	NodeName string `json:"nodeName"`
	// PersistentVolumeName is the PV the workloads mount.
	PersistentVolumeName string `json:"persistentVolumeName"`
	// VolumeID is the PV's spec.csi.volumeHandle.
	VolumeID string `json:"volumeID"`
	// MountOptions is the PV's spec.mountOptions joined with ",".
	MountOptions string `json:"mountOptions"`
	// AuthenticationSource is "driver" or "pod".
	AuthenticationSource string `json:"authenticationSource"`
	// WorkloadFSGroup is the workload's securityContext.fsGroup, or "".
	WorkloadFSGroup string `json:"workloadFSGroup"`
	// The workload's ServiceAccount, namespace and IAM role, set only with pod-level authentication.
	WorkloadServiceAccountName       string `json:"workloadServiceAccountName,omitempty"`
	WorkloadNamespace                string `json:"workloadNamespace,omitempty"`
	WorkloadServiceAccountIAMRoleARN string `json:"workloadServiceAccountIAMRoleARN,omitempty"`
	// MountpointS3PodAttachments maps a Mountpoint Pod's name to the workload Pods it serves.
	MountpointS3PodAttachments map[string][]WorkloadPodAttachment `json:"mountpointS3PodAttachments"`
}

// WorkloadPodAttachment is one workload Pod served by a Mountpoint Pod.
type WorkloadPodAttachment struct {
	WorkloadPodUID string      `json:"workloadPodUID"`
	AttachmentTime metav1.Time `json:"attachmentTime"`
}

// MountpointS3PodAttachmentStatus is declared, as upstream's, and unused.
type MountpointS3PodAttachmentStatus struct{}

// MountpointS3PodAttachmentList is a list of attachments.
type MountpointS3PodAttachmentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MountpointS3PodAttachment `json:"items"`
}

// MountpointPodFor returns the name of the Mountpoint Pod serving the workload Pod with uid, or "".
func (a *MountpointS3PodAttachment) MountpointPodFor(uid string) string {
	for mp, ws := range a.Spec.MountpointS3PodAttachments {
		for _, w := range ws {
			if w.WorkloadPodUID == uid {
				return mp
			}
		}
	}
	return ""
}
