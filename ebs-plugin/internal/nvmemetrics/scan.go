package nvmemetrics

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ebsModel is the model string of every EBS NVMe controller; instance store disks have another.
const ebsModel = "Amazon Elastic Block Store"

// csiMountDir is part of every mount point the kubelet gives a CSI driver for a volume: the staging
// directory (<kubelet>/plugins/kubernetes.io/csi/<driver>/<hash>/globalmount) and the block-volume
// publish paths (<kubelet>/plugins/kubernetes.io/csi/volumeDevices/...), whatever the kubelet's root
// directory. Pod-level publish mounts repeat the staging device, so they add nothing.
const csiMountDir = "/plugins/kubernetes.io/csi/"

// System is the Source of a Linux node: the mount table, sysfs and the NVMe admin ioctl.
type System struct {
	// MountInfo is the mount table to read, /proc/self/mountinfo in production.
	MountInfo string
	// SysBlock is the sysfs block class, /sys/class/block in production.
	SysBlock string
	// Dev is where device nodes live, /dev in production.
	Dev string
}

// NewSystem returns the Source of this node.
func NewSystem() *System {
	return &System{MountInfo: "/proc/self/mountinfo", SysBlock: "/sys/class/block", Dev: "/dev"}
}

// Devices returns the EBS NVMe disks behind the kubelet's CSI mounts, each once, ordered by path. A
// partition counts as its disk, since the log page is the disk's.
func (s *System) Devices() ([]Device, error) {
	table, err := os.ReadFile(s.MountInfo)
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	seen := map[string]bool{}
	var devices []Device
	for _, name := range csiMountedNVMe(string(table)) {
		disk, err := s.disk(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone since the mount table was read, or not a block device
		}
		if err != nil {
			return nil, err
		}
		if seen[disk] {
			continue
		}
		seen[disk] = true
		model, err := s.attr(disk, "model")
		if err != nil {
			return nil, err
		}
		if model != ebsModel {
			continue
		}
		serial, err := s.attr(disk, "serial")
		if err != nil {
			return nil, err
		}
		devices = append(devices, Device{Path: filepath.Join(s.Dev, disk), VolumeID: volumeID(serial)})
	}
	sort.Slice(devices, func(i, j int) bool { return devices[i].Path < devices[j].Path })
	return devices, nil
}

// disk names the whole disk of the block device name: itself, or its parent when it is a partition.
func (s *System) disk(name string) (string, error) {
	dir, err := filepath.EvalSymlinks(filepath.Join(s.SysBlock, name))
	if err != nil {
		return "", fmt.Errorf("resolving block device %s: %w", name, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "partition")); err == nil {
		return filepath.Base(filepath.Dir(dir)), nil
	}
	return filepath.Base(dir), nil
}

// attr reads an attribute of the disk's NVMe controller, trimmed of the padding the kernel keeps.
func (s *System) attr(disk, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(s.SysBlock, disk, "device", name))
	if err != nil {
		return "", fmt.Errorf("reading the %s of %s: %w", name, disk, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// volumeID turns an EBS serial (vol0123...) into the volume ID (vol-0123...).
func volumeID(serial string) string {
	if rest, ok := strings.CutPrefix(serial, "vol"); ok && !strings.HasPrefix(rest, "-") {
		return "vol-" + rest
	}
	return serial
}

// csiMountedNVMe lists the kernel names of the NVMe block devices mounted under a kubelet CSI directory
// in a mountinfo table: a filesystem's source device, or a device node bind-mounted for a block volume.
func csiMountedNVMe(table string) []string {
	var names []string
	for line := range strings.SplitSeq(table, "\n") {
		fields := strings.Fields(line)
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+2 >= len(fields) || !strings.Contains(fields[4], csiMountDir) {
			continue
		}
		root, fstype, source := fields[3], fields[sep+1], fields[sep+2]
		name := ""
		switch {
		case strings.HasPrefix(source, "/dev/nvme"):
			name = strings.TrimPrefix(source, "/dev/")
		case fstype == "devtmpfs" && strings.HasPrefix(root, "/nvme"):
			name = strings.TrimPrefix(root, "/")
		}
		if name != "" && !strings.Contains(name, "/") {
			names = append(names, name)
		}
	}
	return names
}
