package kubeletsim

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// emptyDirPluginDir is where the kubelet keeps a Pod's emptyDir volumes: pods/<uid>/volumes/<this>/<name>.
var emptyDirPluginDir = escapePluginName("kubernetes.io/empty-dir")

// emptyDirPath is the host directory of a Pod's emptyDir volume.
func (p paths) emptyDirPath(podUID types.UID, name string) string {
	return filepath.Join(p.podDir(podUID), "volumes", emptyDirPluginDir, name)
}

// setUpEmptyDirs creates the Pod's emptyDir volumes as the kubelet does: a tmpfs of sizeLimit for medium
// Memory, else a directory; mode 0777, and with an fsGroup owned by that group with the setgid bit. It is
// idempotent, so a retried sync does not mount twice.
func (n *Node) setUpEmptyDirs(pod *v1.Pod) error {
	for _, vol := range pod.Spec.Volumes {
		ed := vol.EmptyDir
		if ed == nil {
			continue
		}
		dir := n.paths.emptyDirPath(pod.UID, vol.Name)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("emptyDir %s of pod %s/%s: %w", vol.Name, pod.Namespace, pod.Name, err)
		}
		switch ed.Medium {
		case v1.StorageMediumDefault:
		case v1.StorageMediumMemory:
			mounted, err := MountsUnder(dir)
			if err != nil {
				return err
			}
			if len(mounted) == 0 {
				opts := ""
				if ed.SizeLimit != nil && ed.SizeLimit.Value() > 0 {
					opts = "size=" + strconv.FormatInt(ed.SizeLimit.Value(), 10)
				}
				if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
					return fmt.Errorf("mount tmpfs for emptyDir %s of pod %s/%s: %w", vol.Name, pod.Namespace, pod.Name, err)
				}
			}
		default:
			return fmt.Errorf("emptyDir %s of pod %s/%s: medium %q is not supported", vol.Name, pod.Namespace, pod.Name, ed.Medium)
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			return err
		}
		if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
			if err := setOwnership(dir, *sc.FSGroup); err != nil {
				return fmt.Errorf("apply fsGroup to emptyDir %s of pod %s/%s: %w", vol.Name, pod.Namespace, pod.Name, err)
			}
		}
	}
	return nil
}

// tearDownEmptyDirs unmounts the Pod's Memory emptyDirs; the directories go with the Pod's directory.
func (n *Node) tearDownEmptyDirs(podUID types.UID) error {
	return unmountAll(filepath.Join(n.paths.podDir(podUID), "volumes", emptyDirPluginDir))
}
