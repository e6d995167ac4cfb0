// Package mounter mounts S3 volumes the way upstream's pod mounter does: the node opens /dev/fuse and
// mounts it (it is privileged), hands the fd to the Mountpoint Pod over its comm socket, waits until
// Mountpoint serves the mount (or reports why not in mount.err), and bind-mounts that shared source into
// each workload's target.
package mounter

import (
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// Paths are the kubelet paths the node works with, under the kubelet root as the node plugin sees it
// (CONTAINER_KUBELET_PATH).
type Paths struct {
	Kubelet string
}

// CommDir is the Mountpoint Pod's comm emptyDir on the host.
func (p Paths) CommDir(mpPodUID string) string {
	return filepath.Join(p.Kubelet, "pods", mpPodUID, "volumes", "kubernetes.io~empty-dir", s3api.CommVolumeName)
}

// SourceDir holds one source mount per Mountpoint Pod.
func (p Paths) SourceDir() string {
	return filepath.Join(p.Kubelet, "plugins", s3api.DriverName, "mnt")
}

// Source is the shared FUSE mount a Mountpoint Pod serves.
func (p Paths) Source(mpPodName string) string {
	return filepath.Join(p.SourceDir(), mpPodName)
}

// targetPattern is the kubelet's CSI target path: the workload Pod's UID and the PV's name.
var targetPattern = regexp.MustCompile(`/pods/([^/]+)/volumes/kubernetes\.io~csi/([^/]+)/mount$`)

// ParseTarget returns the workload Pod UID and PV name a kubelet target path holds.
func ParseTarget(target string) (podUID, pvName string, err error) {
	m := targetPattern.FindStringSubmatch(filepath.Clean(target))
	if m == nil {
		return "", "", fmt.Errorf("target path %q is not a kubelet CSI volume path (.../pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount)", target)
	}
	return m[1], m[2], nil
}
