package testutil

import (
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/params"
)

// MountCall is one recorded mount. Device is the device the mount holds: its source, or for a bind of
// another mount, that mount's device (pinned when the bind is made, as the kernel does).
type MountCall struct {
	Source, Target, FsType string
	Device                 string
	Options, FormatArgs    []string
	Formatted              bool
}

// FakeMounter keeps a mount table in memory. Devices maps a volume ID to the device FindDevice returns;
// Serials maps a device to the volume ID its serial names (a device without an entry has no serial, as a
// loop device).
type FakeMounter struct {
	mu      sync.Mutex
	Devices map[string]string
	Serials map[string]string
	Mounts  map[string]MountCall // target -> mount
	Calls   []MountCall
	Sizes   map[string]int64
	Resized []string
}

// NewFakeMounter returns an empty FakeMounter.
func NewFakeMounter() *FakeMounter {
	return &FakeMounter{Devices: map[string]string{}, Serials: map[string]string{}, Mounts: map[string]MountCall{}, Sizes: map[string]int64{}}
}

// FormatAndMountSensitiveWithFormatOptions implements driver.Mounter.
func (m *FakeMounter) FormatAndMountSensitiveWithFormatOptions(source, target, fstype string, options, _, formatOptions []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := MountCall{Source: source, Target: target, FsType: fstype, Device: source, Options: slices.Clone(options), FormatArgs: slices.Clone(formatOptions), Formatted: true}
	m.Mounts[target] = c
	m.Calls = append(m.Calls, c)
	return nil
}

// Mount implements driver.Mounter.
func (m *FakeMounter) Mount(source, target, fstype string, options []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := MountCall{Source: source, Target: target, FsType: fstype, Device: source, Options: slices.Clone(options)}
	if under, ok := m.Mounts[source]; ok {
		c.Device = under.Device
	}
	m.Mounts[target] = c
	m.Calls = append(m.Calls, c)
	return nil
}

// Unmount implements driver.Mounter.
func (m *FakeMounter) Unmount(target string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.Mounts[target]; !ok {
		return fmt.Errorf("%s not mounted", target)
	}
	delete(m.Mounts, target)
	return nil
}

// IsMountPoint implements driver.Mounter.
func (m *FakeMounter) IsMountPoint(path string) (bool, error) {
	if _, err := os.Stat(path); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.Mounts[path]
	return ok, nil
}

// CleanupMountPoint implements driver.Mounter.
func (m *FakeMounter) CleanupMountPoint(path string) error {
	m.mu.Lock()
	delete(m.Mounts, path)
	m.mu.Unlock()
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// DeviceForMount implements driver.Mounter.
func (m *FakeMounter) DeviceForMount(path string) (string, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.Mounts[path]
	if !ok {
		return "", 0, nil
	}
	return c.Source, 1, nil
}

// FindDevice implements driver.Mounter.
func (m *FakeMounter) FindDevice(_, volumeID string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d, ok := m.Devices[volumeID]; ok {
		return d, nil
	}
	return "", fmt.Errorf("no device for %s: %w", volumeID, os.ErrNotExist)
}

// VerifyDevice implements driver.Mounter: a device whose serial names another volume is refused.
func (m *FakeMounter) VerifyDevice(device, volumeID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if serial, ok := m.Serials[device]; ok && serial != volumeID {
		return fmt.Errorf("device serial %s does not match volume %s", serial, volumeID)
	}
	return nil
}

// FormatArgs implements driver.Mounter.
func (m *FakeMounter) FormatArgs(fsType string, f params.FormatOptions) []string {
	if f.BlockSize != "" {
		return []string{"-b", f.BlockSize}
	}
	return nil
}

// DeviceSize implements driver.Mounter.
func (m *FakeMounter) DeviceSize(device string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.Sizes[device]; ok {
		return s, nil
	}
	return 0, fmt.Errorf("no size for %s", device)
}

// Resize implements driver.Mounter.
func (m *FakeMounter) Resize(device, _ string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Resized = append(m.Resized, device)
	return nil
}

// DevicePresent implements driver.Mounter: the device the mount at path holds is present while it is one
// of Devices' values (delete a volume from Devices to model a disk that left the node).
func (m *FakeMounter) DevicePresent(path string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.Mounts[path]
	if !ok {
		return false, fmt.Errorf("%s not mounted", path)
	}
	for _, d := range m.Devices {
		if d == c.Device {
			return true, nil
		}
	}
	return false, nil
}
