// Package mounter is the node plugin's contact with the host: finding the block device of a volume,
// formatting and mounting it (k8s.io/mount-utils), bind mounts, resizing and statistics.
package mounter

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	mountutils "k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/params"
)

// Mounter wraps mount-utils with the operations the node service needs.
type Mounter struct {
	*mountutils.SafeFormatAndMount
	// LinkDir holds the NVMe by-id links (/dev/disk/by-id in production).
	LinkDir string
	// LegacyXFS formats XFS so that kernels older than 5.10 can mount it.
	LegacyXFS bool
}

// New returns a Mounter that runs the host's mount, mkfs, fsck, blkid, resize2fs and xfs_growfs.
func New(linkDir string, legacyXFS bool) *Mounter {
	e := utilexec.New()
	return &Mounter{
		SafeFormatAndMount: mountutils.NewSafeFormatAndMount(mountutils.New(""), e),
		LinkDir:            linkDir,
		LegacyXFS:          legacyXFS,
	}
}

// FormatArgs returns the mkfs options for the volume's format parameters; mount-utils appends the force
// flags and the device.
func (m *Mounter) FormatArgs(fsType string, f params.FormatOptions) []string {
	var args []string
	switch {
	case strings.HasPrefix(fsType, "ext"):
		if f.BlockSize != "" {
			args = append(args, "-b", f.BlockSize)
		}
		if f.InodeSize != "" {
			args = append(args, "-I", f.InodeSize)
		}
		if f.BytesPerInode != "" {
			args = append(args, "-i", f.BytesPerInode)
		}
		if f.NumberOfInodes != "" {
			args = append(args, "-N", f.NumberOfInodes)
		}
		if f.Ext4BigAlloc {
			args = append(args, "-O", "bigalloc")
		}
		if f.Ext4ClusterSize != "" {
			args = append(args, "-C", f.Ext4ClusterSize)
		}
		if f.Ext4EncryptionSupport {
			args = append(args, "-O", "encrypt")
		}
	case fsType == "xfs":
		if f.BlockSize != "" {
			args = append(args, "-b", "size="+f.BlockSize)
		}
		if f.InodeSize != "" {
			args = append(args, "-i", "size="+f.InodeSize)
		}
		if m.LegacyXFS {
			args = append(args, "-m", "bigtime=0,inobtcount=0,reflink=0", "-i", "nrext64=0")
		}
	}
	return args
}

// NVMeLink is the by-id link name Nitro instances create for an EBS volume.
func NVMeLink(volumeID string) string {
	return "nvme-Amazon_Elastic_Block_Store_" + strings.ReplaceAll(volumeID, "-", "")
}

// FindDevice returns the block device of the volume: the publish context's devicePath if it exists,
// otherwise the NVMe by-id link. The result has symlinks resolved.
func (m *Mounter) FindDevice(devicePath, volumeID string) (string, error) {
	var tried []string
	if devicePath != "" {
		if resolved, err := filepath.EvalSymlinks(devicePath); err == nil {
			if isBlockDevice(resolved) {
				return resolved, nil
			}
		}
		tried = append(tried, devicePath)
	}
	// The volume ID comes from the PV; as a link name it must not climb out of the link directory.
	name := NVMeLink(volumeID)
	if filepath.Base(name) != name || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("volume ID %q cannot name a by-id link (tried %s)", volumeID, strings.Join(tried, ", "))
	}
	link := filepath.Join(m.LinkDir, name)
	resolved, err := filepath.EvalSymlinks(link)
	if err == nil {
		if !strings.HasPrefix(resolved, "/dev/") {
			return "", fmt.Errorf("%s resolves to %s, outside /dev", link, resolved)
		}
		if isBlockDevice(resolved) {
			return resolved, nil
		}
	}
	tried = append(tried, link)
	return "", fmt.Errorf("no block device for volume %s (tried %s): %w", volumeID, strings.Join(tried, ", "), os.ErrNotExist)
}

func isBlockDevice(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0
}

// VerifyDevice checks with lsblk that the device's serial names the volume (a Xen device name can be
// reused by another volume). Devices without a serial (loop devices, some Xen disks) pass; so does an lsblk
// failure, as upstream does.
func (m *Mounter) VerifyDevice(device, volumeID string) error {
	out, err := m.Exec.Command("lsblk", "--noheadings", "--ascii", "--nodeps", "--output", "SERIAL", "--", device).CombinedOutput()
	if err != nil {
		return nil
	}
	return checkSerial(string(out), volumeID)
}

func checkSerial(lsblk, volumeID string) error {
	want := strings.ReplaceAll(volumeID, "-", "")
	for _, f := range strings.Fields(lsblk) {
		if strings.HasPrefix(f, "vol") && f != want && !strings.HasPrefix(f, want+"_") {
			return fmt.Errorf("device serial %s does not match volume %s", f, volumeID)
		}
	}
	return nil
}

// DeviceSize returns the size of a block device in bytes.
func (m *Mounter) DeviceSize(device string) (int64, error) {
	out, err := m.Exec.Command("blockdev", "--getsize64", device).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("blockdev --getsize64 %s: %w: %s", device, err, strings.TrimSpace(string(out)))
	}
	return strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
}

// Resize grows the filesystem mounted at mountPath on device when the device is larger.
func (m *Mounter) Resize(device, mountPath string) error {
	r := mountutils.NewResizeFs(m.Exec)
	need, err := r.NeedResize(device, mountPath)
	if err != nil {
		return fmt.Errorf("check whether %s needs a resize: %w", device, err)
	}
	if !need {
		return nil
	}
	if _, err := r.Resize(device, mountPath); err != nil {
		return fmt.Errorf("resize filesystem on %s: %w", device, err)
	}
	return nil
}

// Stats are a filesystem's usage.
type Stats struct {
	TotalBytes, AvailableBytes, UsedBytes int64
	TotalInodes, FreeInodes, UsedInodes   int64
}

// FilesystemStats reads usage with statfs.
func FilesystemStats(path string) (Stats, error) {
	var s unix.Statfs_t
	if err := unix.Statfs(path, &s); err != nil {
		return Stats{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := int64(s.Bsize)
	st := Stats{
		TotalBytes:     int64(s.Blocks) * bs,
		AvailableBytes: int64(s.Bavail) * bs,
		UsedBytes:      (int64(s.Blocks) - int64(s.Bfree)) * bs,
		TotalInodes:    int64(s.Files),
		FreeInodes:     int64(s.Ffree),
	}
	st.UsedInodes = st.TotalInodes - st.FreeInodes
	return st, nil
}

// IsBlockDevicePath reports whether path (after symlinks) is a block device.
func IsBlockDevicePath(path string) bool {
	resolved, err := filepath.EvalSymlinks(path)
	return err == nil && isBlockDevice(resolved)
}

// ToolsAvailable reports missing host tools, for a clear start-up log line.
func ToolsAvailable() []string {
	var missing []string
	for _, t := range []string{"mount", "umount", "blkid", "mkfs.ext4", "mkfs.xfs", "fsck", "resize2fs", "xfs_growfs", "blockdev", "lsblk"} {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	return missing
}

// DeviceForMount returns the device mounted at path and how many mounts it has.
func (m *Mounter) DeviceForMount(path string) (string, int, error) {
	return mountutils.GetDeviceNameFromMount(m, path)
}

// IsMountPoint reports whether path is a mount point, reading the mount table (bind mounts of a file on
// the same filesystem fool the cheaper device-number check).
func (m *Mounter) IsMountPoint(path string) (bool, error) {
	return m.Interface.IsMountPoint(path)
}

// CleanupMountPoint unmounts path if mounted and removes it.
func (m *Mounter) CleanupMountPoint(path string) error {
	return mountutils.CleanupMountPoint(path, m, true)
}

// sysDevBlock lists every block device the kernel knows, named major:minor.
const sysDevBlock = "/sys/dev/block"

// DevicePresent reports whether the block device behind path is still on the node: the device node itself
// for a raw block bind, else the device of the filesystem mounted at path. A hot-removed disk (an EBS
// volume detached under a running node) leaves its mounts and bound device nodes behind, but the kernel
// drops it from /sys/dev/block.
func (m *Mounter) DevicePresent(path string) (bool, error) {
	return devicePresent(sysDevBlock, path)
}

func devicePresent(sysDir, path string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
	dev := st.Dev
	if st.Mode&unix.S_IFMT == unix.S_IFBLK {
		dev = st.Rdev
	}
	_, err := os.Stat(filepath.Join(sysDir, fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev))))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("look up the device of %s: %w", path, err)
	}
}
