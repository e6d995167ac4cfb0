package reconciler

import (
	"crypto/rand"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/stowage-csi/stowage/s3-controller/internal/config"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// Volume attributes that shape the Mountpoint Pod (upstream's volumecontext names).
const (
	attrCache                       = "cache"
	attrCacheEmptyDirSizeLimit      = "cacheEmptyDirSizeLimit"
	attrCacheEmptyDirMedium         = "cacheEmptyDirMedium"
	attrCacheEphemeralStorageClass  = "cacheEphemeralStorageClassName"
	attrCacheEphemeralRequest       = "cacheEphemeralStorageResourceRequest"
	attrMountpointServiceAccount    = "mountpointPodServiceAccountName"
	attrResourcesRequestsCPU        = "mountpointContainerResourcesRequestsCpu"
	attrResourcesRequestsMemory     = "mountpointContainerResourcesRequestsMemory"
	attrResourcesLimitsCPU          = "mountpointContainerResourcesLimitsCpu"
	attrResourcesLimitsMemory       = "mountpointContainerResourcesLimitsMemory"
	cacheEmptyDir, cacheEphemeral   = "emptyDir", "ephemeral"
	labelCacheType, localEphemeral  = "s3.csi.aws.com/type", "local-ephemeral-cache"
	mountpointUID                   = int64(1000)
	commSizeLimit                   = 10 * 1024 * 1024
	mountpointTerminationGraceSecs  = int64(600)
	mountpointPodGenerateNamePrefix = "mp-"
)

// newMountpointPodName picks a Mountpoint Pod name the way the API server's generateName does ("mp-" and
// five characters), but before the Pod exists, so the attachment can name it first (see assign).
func newMountpointPodName() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789" // the API server's: no vowels, no confusable digits
	b := make([]byte, 5)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return mountpointPodGenerateNamePrefix + string(b)
}

// BuildMountpointPod returns the Mountpoint Pod named name that serves PV pv on node with the given access,
// as upstream's mppod.Creator builds it, plus Stowage's access annotation. Bad volume attributes are an
// error that names the attribute.
func BuildMountpointPod(cfg config.MountpointPod, name, node string, pv *corev1.PersistentVolume, access Access) (*corev1.Pod, error) {
	labels := maps.Clone(cfg.PodLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[s3api.LabelMountpointVersion] = cfg.MountpointVersion
	labels[s3api.LabelMountedByVersion] = cfg.CSIDriverVersion
	annotations := maps.Clone(cfg.PodAnnotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[s3api.AnnotationVolumeName] = pv.Name
	annotations[s3api.AnnotationVolumeID] = pv.Spec.CSI.VolumeHandle
	annotations[s3api.AnnotationDaemonSetPod] = "true"
	annotations[AnnotationAccess] = string(access)

	priority := cfg.PriorityClassName
	if cfg.HeadroomEnabled() {
		priority = cfg.PreemptingPriorityClassName
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: mountpointPodGenerateNamePrefix, Namespace: cfg.Namespace,
			Labels: labels, Annotations: annotations,
		},
		Spec: corev1.PodSpec{
			// mount-s3 exits 0 only after an unmount was asked for; anything else is restarted.
			RestartPolicy:                 corev1.RestartPolicyOnFailure,
			TerminationGracePeriodSeconds: ptr.To(mountpointTerminationGraceSecs),
			SecurityContext:               &corev1.PodSecurityContext{FSGroup: ptr.To(mountpointUID)},
			NodeSelector:                  map[string]string{corev1.LabelOSStable: "linux"},
			PriorityClassName:             priority,
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
				}}},
			}},
			// The workload's node may carry any taint the workload tolerates; the Mountpoint Pod must run there.
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name:            s3api.MountpointContainerName,
				Image:           cfg.Image,
				ImagePullPolicy: cfg.ImagePullPolicy,
				Command:         []string{cfg.Command},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					RunAsUser:                ptr.To(mountpointUID),
					RunAsNonRoot:             ptr.To(true),
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: s3api.CommVolumeName, MountPath: s3api.CommDir}},
			}},
			Volumes: []corev1.Volume{{Name: s3api.CommVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(commSizeLimit, resource.BinarySI),
			}}}},
		},
	}
	attrs := pv.Spec.CSI.VolumeAttributes
	if err := addCache(pod, attrs, pv.Spec.MountOptions); err != nil {
		return nil, err
	}
	pod.Spec.ServiceAccountName = attrs[attrMountpointServiceAccount]
	c := &pod.Spec.Containers[0]
	var err error
	if c.Resources.Requests, err = resources(attrs, attrResourcesRequestsCPU, attrResourcesRequestsMemory); err != nil {
		return nil, err
	}
	if c.Resources.Limits, err = resources(attrs, attrResourcesLimitsCPU, attrResourcesLimitsMemory); err != nil {
		return nil, err
	}
	return pod, nil
}

// addCache adds the local-cache volume the attributes (or the deprecated --cache mount option) ask for.
func addCache(pod *corev1.Pod, attrs map[string]string, mountOptions []string) error {
	kind := attrs[attrCache]
	if hasCacheOption(mountOptions) {
		if kind != "" {
			return fmt.Errorf("cache configured with both mountOptions and the %q volume attribute; remove the deprecated --cache mount option", attrCache)
		}
		kind = cacheEmptyDir
	}
	var src corev1.VolumeSource
	switch kind {
	case "":
		return nil
	case cacheEmptyDir:
		ed := &corev1.EmptyDirVolumeSource{}
		if s := attrs[attrCacheEmptyDirSizeLimit]; s != "" {
			q, err := resource.ParseQuantity(s)
			if err != nil {
				return fmt.Errorf("volume attribute %s=%q: %w", attrCacheEmptyDirSizeLimit, s, err)
			}
			ed.SizeLimit = &q
		}
		switch m := attrs[attrCacheEmptyDirMedium]; m {
		case "":
		case string(corev1.StorageMediumMemory):
			ed.Medium = corev1.StorageMediumMemory
		default:
			return fmt.Errorf("volume attribute %s=%q: only %q is supported", attrCacheEmptyDirMedium, m, corev1.StorageMediumMemory)
		}
		src.EmptyDir = ed
	case cacheEphemeral:
		class, size := attrs[attrCacheEphemeralStorageClass], attrs[attrCacheEphemeralRequest]
		if class == "" || size == "" {
			return fmt.Errorf("volume attributes %s and %s are required with %s=%s", attrCacheEphemeralStorageClass, attrCacheEphemeralRequest, attrCache, cacheEphemeral)
		}
		q, err := resource.ParseQuantity(size)
		if err != nil {
			return fmt.Errorf("volume attribute %s=%q: %w", attrCacheEphemeralRequest, size, err)
		}
		src.Ephemeral = &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{labelCacheType: localEphemeral}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: &class,
				VolumeMode:       ptr.To(corev1.PersistentVolumeFilesystem),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}},
			},
		}}
	default:
		return fmt.Errorf("volume attribute %s=%q: only %q and %q are supported", attrCache, kind, cacheEmptyDir, cacheEphemeral)
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: s3api.CacheVolumeName, VolumeSource: src})
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: s3api.CacheVolumeName, MountPath: s3api.CacheDir})
	return nil
}

// hasCacheOption reports a "cache" mount option in any of the forms the node accepts.
func hasCacheOption(mountOptions []string) bool {
	for _, opt := range strings.Split(normalizeMountOptions(strings.Join(mountOptions, ",")), ",") {
		if opt == "--cache" || strings.HasPrefix(opt, "--cache=") {
			return true
		}
	}
	return false
}

// resources parses a CPU and a memory attribute; neither set means no list at all, as upstream.
func resources(attrs map[string]string, cpuAttr, memAttr string) (corev1.ResourceList, error) {
	var list corev1.ResourceList
	for name, attr := range map[corev1.ResourceName]string{corev1.ResourceCPU: cpuAttr, corev1.ResourceMemory: memAttr} {
		s := attrs[attr]
		if s == "" {
			continue
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return nil, fmt.Errorf("volume attribute %s=%q: %w", attr, s, err)
		}
		if list == nil {
			list = corev1.ResourceList{}
		}
		list[name] = q
	}
	return list, nil
}
