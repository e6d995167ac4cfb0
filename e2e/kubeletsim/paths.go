package kubeletsim

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// csiPluginName is the in-tree plugin name the kubelet files every CSI volume under.
const csiPluginName = "kubernetes.io/csi"

// paths is the kubelet's on-disk layout under its root directory (default /var/lib/kubelet).
type paths struct{ root string }

// pluginDir is <root>/plugins/kubernetes.io/csi.
func (p paths) pluginDir() string { return filepath.Join(p.root, "plugins", csiPluginName) }

// stagingPath is where a file-system volume is staged ("global mount"), one per volume and node.
func (p paths) stagingPath(driver, volumeHandle string) string {
	return filepath.Join(p.pluginDir(), driver, sha256Hex(volumeHandle), "globalmount")
}

// blockStagingPath is the staging directory of a raw block volume, named for its PersistentVolume.
func (p paths) blockStagingPath(pvName string) string {
	return filepath.Join(p.pluginDir(), "volumeDevices", "staging", pvName)
}

// blockPublishPath is the file a raw block volume is published at for one Pod.
func (p paths) blockPublishPath(pvName string, podUID types.UID) string {
	return filepath.Join(p.pluginDir(), "volumeDevices", "publish", pvName, string(podUID))
}

// podDir is <root>/pods/<uid>.
func (p paths) podDir(podUID types.UID) string { return filepath.Join(p.root, "pods", string(podUID)) }

// publishPath is where a file-system volume is published for a Pod; specName is the PersistentVolume name,
// or the Pod's volume name for an inline volume. The ~ stands for the / of the plugin name.
func (p paths) publishPath(podUID types.UID, specName string) string {
	return filepath.Join(p.podDir(podUID), "volumes", escapePluginName(csiPluginName), specName, "mount")
}

// podDevicePath is the path a Pod sees a raw block volume at.
func (p paths) podDevicePath(podUID types.UID, pvName string) string {
	return filepath.Join(p.podDir(podUID), "volumeDevices", escapePluginName(csiPluginName), pvName)
}

func escapePluginName(name string) string { return strings.ReplaceAll(name, "/", "~") }

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// attachmentName is the name the attach-detach controller gives the VolumeAttachment of a CSI volume.
func attachmentName(volumeHandle, driver, nodeName string) string {
	return "csi-" + sha256Hex(volumeHandle+driver+nodeName)
}

// uniqueVolumeName is how the kubelet and the attach-detach controller name a CSI volume in
// node.status.volumesInUse and volumesAttached.
func uniqueVolumeName(driver, volumeHandle string) string {
	return csiPluginName + "/" + driver + "^" + volumeHandle
}

// inlineVolumeHandle is the volume ID the kubelet gives an inline (ephemeral) CSI volume.
func inlineVolumeHandle(podUID types.UID, volumeName string) string {
	return "csi-" + sha256Hex(string(podUID)+volumeName)
}
