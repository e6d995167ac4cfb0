package reconciler

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// inlineVolume turns a workload's CSI inline volume of this driver into a volume whose PV exists only here:
// named s3api.InlineVolumeName(<pod UID>, <volume>) with the kubelet's volume ID for it, so that the
// attachment, and with it the Mountpoint Pod, belongs to this one Pod and goes with it. It returns nil, nil
// for a volume of another driver, and an error for an inline volume that would use the driver's
// credentials (the node refuses those too).
func inlineVolume(pod *corev1.Pod, vol *corev1.Volume) (*volume, error) {
	src := vol.CSI
	if src == nil || src.Driver != s3api.DriverName {
		return nil, nil
	}
	if a := src.VolumeAttributes[attrAuthenticationSource]; a != s3api.AuthenticationSourcePod {
		return nil, fmt.Errorf("inline volume %s: volume attribute %s=%q: an inline volume mounts with the Pod's own credentials only, set %s: %s",
			vol.Name, attrAuthenticationSource, a, attrAuthenticationSource, s3api.AuthenticationSourcePod)
	}
	uid := string(pod.UID)
	readOnly := src.ReadOnly != nil && *src.ReadOnly
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: s3api.InlineVolumeName(uid, vol.Name)},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
			Driver: s3api.DriverName, VolumeHandle: s3api.InlineVolumeHandle(uid, vol.Name),
			VolumeAttributes: src.VolumeAttributes, ReadOnly: readOnly,
		}}},
	}
	access := ReadWrite
	if readOnly {
		access = ReadOnly
	}
	return &volume{pod: pod, pv: pv, access: access}, nil
}
