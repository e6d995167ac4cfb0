package s3api

import (
	"crypto/sha256"
	"fmt"
)

// VolumeContextEphemeral is the volume context key the kubelet sets to "true" for a CSI inline
// (ephemeral) volume of a Pod.
const VolumeContextEphemeral = "csi.storage.k8s.io/ephemeral"

// InlineVolumeName is the PersistentVolumeName an inline volume's MountpointS3PodAttachment carries: inline
// volumes have no PV, and the Pod's UID makes the name, and so the attachment, the Pod's own (an inline
// volume is never shared across Pods). The node reads both parts from the kubelet's target path.
func InlineVolumeName(podUID, volumeName string) string { return podUID + "-" + volumeName }

// InlineVolumeHandle is the volume ID the kubelet gives an inline volume in NodePublishVolume
// (pkg/volume/csi makeVolumeHandle): "csi-" and the hex SHA-256 of the Pod's UID and the volume's name.
func InlineVolumeHandle(podUID, volumeName string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(podUID+volumeName)))
}
