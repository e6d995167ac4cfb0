package kubeletsim

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Keys the kubelet adds to the volume context.
const (
	keyPodName            = "csi.storage.k8s.io/pod.name"
	keyPodNamespace       = "csi.storage.k8s.io/pod.namespace"
	keyPodUID             = "csi.storage.k8s.io/pod.uid"
	keyServiceAccountName = "csi.storage.k8s.io/serviceAccount.name"
	keyEphemeral          = "csi.storage.k8s.io/ephemeral"
	keyTokens             = "csi.storage.k8s.io/serviceAccount.tokens"
)

// volume is one CSI volume of one Pod, resolved from the Pod spec and, for claims, the PersistentVolume.
type volume struct {
	podVolume  string // the volume's name in the Pod spec
	specName   string // PersistentVolume name; the Pod's volume name for inline volumes
	driver     string
	handle     string
	unique     string
	inline     bool
	block      bool
	fsType     string
	mountFlags []string
	modes      []v1.PersistentVolumeAccessMode
	readOnly   bool
	attributes map[string]string
	stageRef   *v1.SecretReference
	publishRef *v1.SecretReference
	claim      string // claim name, for expansion; empty for inline volumes
	namespace  string // the Pod's namespace
}

// volumeFromPV resolves a claim-backed volume. readOnly is the Pod's persistentVolumeClaim.readOnly.
func volumeFromPV(podVolume string, pv *v1.PersistentVolume, claim string, readOnly bool) (*volume, error) {
	src := pv.Spec.CSI
	if src == nil {
		return nil, fmt.Errorf("persistentvolume %s is not a CSI volume", pv.Name)
	}
	v := &volume{
		podVolume: podVolume, specName: pv.Name, driver: src.Driver, handle: src.VolumeHandle,
		unique: uniqueVolumeName(src.Driver, src.VolumeHandle), fsType: src.FSType,
		mountFlags: pv.Spec.MountOptions, modes: pv.Spec.AccessModes, readOnly: readOnly || src.ReadOnly,
		attributes: src.VolumeAttributes, stageRef: src.NodeStageSecretRef, publishRef: src.NodePublishSecretRef,
		claim: claim,
	}
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock {
		v.block = true
	}
	return v, nil
}

// volumeFromInline resolves an inline csi: volume of a Pod (CSI ephemeral volume).
func volumeFromInline(pod *v1.Pod, pv v1.Volume) *volume {
	src := pv.CSI
	handle := inlineVolumeHandle(pod.UID, pv.Name)
	v := &volume{
		podVolume: pv.Name, specName: pv.Name, driver: src.Driver, handle: handle,
		unique: uniqueVolumeName(src.Driver, handle), inline: true,
		modes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		attributes: src.VolumeAttributes,
	}
	if src.FSType != nil {
		v.fsType = *src.FSType
	}
	if src.ReadOnly != nil {
		v.readOnly = *src.ReadOnly
	}
	if src.NodePublishSecretRef != nil {
		v.publishRef = &v1.SecretReference{Name: src.NodePublishSecretRef.Name, Namespace: pod.Namespace}
	}
	return v
}

// accessMode maps the volume's access modes to a CSI access mode as the kubelet does; multiWriter is the
// plugin's SINGLE_NODE_MULTI_WRITER capability, which turns ReadWriteOnce into SINGLE_NODE_MULTI_WRITER.
func (v *volume) accessMode(multiWriter bool) csi.VolumeCapability_AccessMode_Mode {
	has := func(m v1.PersistentVolumeAccessMode) bool {
		for _, x := range v.modes {
			if x == m {
				return true
			}
		}
		return false
	}
	switch {
	case has(v1.ReadWriteOncePod) && multiWriter:
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
	case has(v1.ReadWriteOncePod):
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	case has(v1.ReadWriteOnce) && multiWriter:
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
	case has(v1.ReadWriteOnce):
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	case has(v1.ReadWriteMany):
		return csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	case has(v1.ReadOnlyMany):
		return csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	default:
		return csi.VolumeCapability_AccessMode_UNKNOWN
	}
}

// capability is the volume capability sent with every node call. mountGroup is set only on publish.
func (v *volume) capability(multiWriter bool, mountGroup string) *csi.VolumeCapability {
	mode := &csi.VolumeCapability_AccessMode{Mode: v.accessMode(multiWriter)}
	if v.block {
		return &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}, AccessMode: mode}
	}
	return &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{
		FsType: v.fsType, MountFlags: v.mountFlags, VolumeMountGroup: mountGroup,
	}}, AccessMode: mode}
}

// serviceAccountToken is one audience's entry in csi.storage.k8s.io/serviceAccount.tokens.
type serviceAccountToken struct {
	Token               string `json:"token"`
	ExpirationTimestamp string `json:"expirationTimestamp"`
}

// publishContext is the volume context of NodePublishVolume: the volume's attributes plus, when the
// CSIDriver asks for it, the Pod's identity; tokens (by audience) go in too unless the driver wants them in
// the secrets, which publishSecrets handles.
func publishContext(v *volume, driver *storagev1.CSIDriver, pod *v1.Pod, tokens map[string]serviceAccountToken) (map[string]string, error) {
	ctx := make(map[string]string, len(v.attributes)+6)
	for k, val := range v.attributes {
		ctx[k] = val
	}
	if driver != nil && driver.Spec.PodInfoOnMount != nil && *driver.Spec.PodInfoOnMount {
		ctx[keyPodName] = pod.Name
		ctx[keyPodNamespace] = pod.Namespace
		ctx[keyPodUID] = string(pod.UID)
		ctx[keyServiceAccountName] = pod.Spec.ServiceAccountName
		ctx[keyEphemeral] = strconv.FormatBool(v.inline)
	}
	if len(tokens) > 0 && !tokensInSecrets(driver) {
		b, err := json.Marshal(tokens)
		if err != nil {
			return nil, fmt.Errorf("encode service account tokens: %w", err)
		}
		ctx[keyTokens] = string(b)
	}
	return ctx, nil
}

// publishSecrets adds the tokens to the publish secrets when the CSIDriver sets serviceAccountTokenInSecrets.
func publishSecrets(secrets map[string]string, driver *storagev1.CSIDriver, tokens map[string]serviceAccountToken) (map[string]string, error) {
	if len(tokens) == 0 || !tokensInSecrets(driver) {
		return secrets, nil
	}
	b, err := json.Marshal(tokens)
	if err != nil {
		return nil, fmt.Errorf("encode service account tokens: %w", err)
	}
	out := make(map[string]string, len(secrets)+1)
	for k, val := range secrets {
		out[k] = val
	}
	out[keyTokens] = string(b)
	return out, nil
}

func tokensInSecrets(driver *storagev1.CSIDriver) bool {
	return driver != nil && driver.Spec.ServiceAccountTokenInSecrets != nil && *driver.Spec.ServiceAccountTokenInSecrets
}

// attachRequired is the CSIDriver's attachRequired; without a CSIDriver object the kubelet assumes true.
func attachRequired(driver *storagev1.CSIDriver) bool {
	return driver == nil || driver.Spec.AttachRequired == nil || *driver.Spec.AttachRequired
}

// fsGroupAction decides how the kubelet applies a Pod's fsGroup to a published volume: delegate it to the
// plugin (VolumeMountGroup), change ownership itself, or leave it.
type fsGroupAction int

const (
	fsGroupNone fsGroupAction = iota
	fsGroupDelegate
	fsGroupChown
)

func fsGroupFor(v *volume, driver *storagev1.CSIDriver, pod *v1.Pod, mountGroupCap bool) fsGroupAction {
	if v.block || pod.Spec.SecurityContext == nil || pod.Spec.SecurityContext.FSGroup == nil {
		return fsGroupNone
	}
	// The kubelet delegates to a plugin with VOLUME_MOUNT_GROUP whatever the CSIDriver's fsGroupPolicy
	// (pkg/volume/csi/csi_mounter.go); the S3 driver, which sets no policy, relies on it.
	if mountGroupCap {
		return fsGroupDelegate
	}
	policy := storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
	if driver != nil && driver.Spec.FSGroupPolicy != nil {
		policy = *driver.Spec.FSGroupPolicy
	}
	switch policy {
	case storagev1.FileFSGroupPolicy:
	case storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy:
		if v.fsType == "" || v.accessMode(false) != csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER {
			return fsGroupNone
		}
	default:
		return fsGroupNone
	}
	if v.readOnly {
		return fsGroupNone
	}
	return fsGroupChown
}
