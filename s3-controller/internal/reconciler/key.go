package reconciler

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// Volume attributes the controller reads (upstream's volumecontext names).
const (
	attrAuthenticationSource = "authenticationSource"
	roleARNAnnotation        = "eks.amazonaws.com/role-arn"
)

// Access is whether a workload mounts a volume read-only; Mountpoint Pods serve one access only.
type Access string

const (
	ReadWrite Access = "read-write"
	ReadOnly  Access = "read-only"
)

// AnnotationAccess marks the access a Stowage Mountpoint Pod serves. It is Stowage's own: upstream never
// sets it, so upstream's Mountpoint Pods (which also carry another version label) never get Stowage workloads.
const AnnotationAccess = "s3.stowage-csi.io/workload-access"

// volume is one S3 volume of a workload Pod, resolved to its claim and PV.
type volume struct {
	pod    *corev1.Pod
	pvc    *corev1.PersistentVolumeClaim
	pv     *corev1.PersistentVolume
	access Access
}

// attachmentSpec is the S3PA spec (without the map) a workload volume needs: upstream's sharing key.
func (v *volume) attachmentSpec(sa *corev1.ServiceAccount) s3api.MountpointS3PodAttachmentSpec {
	spec := s3api.MountpointS3PodAttachmentSpec{
		NodeName:             v.pod.Spec.NodeName,
		PersistentVolumeName: v.pv.Name,
		VolumeID:             v.pv.Spec.CSI.VolumeHandle,
		// The PV's own order, as upstream writes it; comparisons use normalizeMountOptions.
		MountOptions:         strings.Join(v.pv.Spec.MountOptions, ","),
		AuthenticationSource: authSource(v.pv),
		WorkloadFSGroup:      fsGroup(v.pod),
	}
	if spec.AuthenticationSource == s3api.AuthenticationSourcePod {
		spec.WorkloadNamespace = v.pod.Namespace
		spec.WorkloadServiceAccountName = saName(v.pod)
		if sa != nil {
			spec.WorkloadServiceAccountIAMRoleARN = sa.Annotations[roleARNAnnotation]
		}
	}
	return spec
}

func authSource(pv *corev1.PersistentVolume) string {
	if s := pv.Spec.CSI.VolumeAttributes[attrAuthenticationSource]; s != "" {
		return s
	}
	return s3api.AuthenticationSourceDriver
}

func fsGroup(pod *corev1.Pod) string {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		return strconv.FormatInt(*sc.FSGroup, 10)
	}
	return ""
}

func saName(pod *corev1.Pod) string {
	if pod.Spec.ServiceAccountName != "" {
		return pod.Spec.ServiceAccountName
	}
	return "default"
}

// sharingKey is the index value of an S3PA spec: upstream's sharing fields with the mount options normalized,
// so "a,b" and "b,a" (or "allow-delete" and "--allow-delete") share one attachment.
func sharingKey(s *s3api.MountpointS3PodAttachmentSpec) string {
	return strings.Join([]string{s.NodeName, s.PersistentVolumeName, s.VolumeID, normalizeMountOptions(s.MountOptions),
		s.AuthenticationSource, s.WorkloadFSGroup, s.WorkloadNamespace, s.WorkloadServiceAccountName,
		s.WorkloadServiceAccountIAMRoleARN}, "\x00")
}

// normalizeMountOptions turns a joined mount option list into a canonical one: each option as the node
// plugin would pass it to mount-s3 ("--key" or "--key=value", from "key value", "key=value", "--key ..."),
// duplicates removed, sorted. The node treats options as a set, so the order never changed the mount.
func normalizeMountOptions(joined string) string {
	var opts []string
	for _, item := range strings.Split(joined, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, value, hasValue := strings.Cut(item, "=")
		if k, v, ok := strings.Cut(item, " "); ok && (!hasValue || len(k) < len(key)) {
			key, value, hasValue = k, strings.TrimSpace(v), true
		}
		opt := "--" + strings.TrimLeft(strings.TrimSpace(key), "-")
		if hasValue {
			opt += "=" + strings.TrimSpace(value)
		}
		opts = append(opts, opt)
	}
	slices.Sort(opts)
	return strings.Join(slices.Compact(opts), ",")
}

// workloadAccess is read-only when kubelet will mount the volume read-only for this Pod: the Pod's claim
// source says readOnly, the PV's CSI source does, or the claim or the PV allows ReadOnlyMany only.
func workloadAccess(claim *corev1.PersistentVolumeClaimVolumeSource, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) Access {
	if claim.ReadOnly || (pv.Spec.CSI != nil && pv.Spec.CSI.ReadOnly) || onlyROX(pvc.Spec.AccessModes) || onlyROX(pv.Spec.AccessModes) {
		return ReadOnly
	}
	return ReadWrite
}

func onlyROX(modes []corev1.PersistentVolumeAccessMode) bool {
	if len(modes) == 0 {
		return false
	}
	for _, m := range modes {
		if m != corev1.ReadOnlyMany {
			return false
		}
	}
	return true
}
