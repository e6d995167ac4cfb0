package mounter

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
	mountutils "k8s.io/mount-utils"
)

// FUSESource is the mount table's source of every mount Mountpoint serves (upstream's).
const FUSESource = "mountpoint-s3"

// Syscalls are the privileged calls, injectable so that tests need no root.
type Syscalls interface {
	// OpenFUSE opens /dev/fuse read-write.
	OpenFUSE() (fd int, err error)
	CloseFd(fd int) error
	// MountFUSE mounts the FUSE connection fd at target.
	MountFUSE(target string, fd int, readOnly, allowOther bool) error
	// Bind bind-mounts source at target, read-only if asked.
	Bind(source, target string, readOnly bool) error
	// Unmount unmounts target with umount2 flags.
	Unmount(target string, flags int) error
	// Stat stats path; on a FUSE mount it waits for the filesystem to answer.
	Stat(path string) error
	// Mounts reads the mount table.
	Mounts() ([]mountutils.MountInfo, error)
}

// Linux are the real calls.
type Linux struct{}

var _ Syscalls = Linux{}

func (Linux) OpenFUSE() (int, error) {
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /dev/fuse: %w", err)
	}
	return fd, nil
}

func (Linux) CloseFd(fd int) error { return unix.Close(fd) }

// MountFUSE is upstream's mount(2): rootmode is the target's file type in octal, as the kernel parses it,
// and the connection belongs to the node's effective user.
func (Linux) MountFUSE(target string, fd int, readOnly, allowOther bool) error {
	var st unix.Stat_t
	if err := unix.Stat(target, &st); err != nil {
		return fmt.Errorf("stat %s: %w", target, err)
	}
	data := fmt.Sprintf("fd=%d,rootmode=%o,user_id=%d,group_id=%d,default_permissions", fd, st.Mode&unix.S_IFMT, os.Geteuid(), os.Getegid())
	if allowOther {
		data += ",allow_other"
	}
	flags := uintptr(unix.MS_NODEV | unix.MS_NOSUID | unix.MS_NOATIME)
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount(FUSESource, target, "fuse", flags, data); err != nil {
		return fmt.Errorf("mount fuse at %s: %w", target, err)
	}
	return nil
}

// Bind makes a read-only bind with a remount: MS_RDONLY on the first MS_BIND call is ignored.
func (Linux) Bind(source, target string, readOnly bool) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mount %s at %s: %w", source, target, err)
	}
	if !readOnly {
		return nil
	}
	if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		_ = unix.Unmount(target, unix.MNT_DETACH)
		return fmt.Errorf("make the bind mount at %s read-only: %w", target, err)
	}
	return nil
}

func (Linux) Unmount(target string, flags int) error {
	if err := unix.Unmount(target, flags); err != nil {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	return nil
}

func (Linux) Stat(path string) error {
	_, err := os.Stat(path)
	return err
}

func (Linux) Mounts() ([]mountutils.MountInfo, error) {
	return mountutils.ParseMountInfo("/proc/self/mountinfo")
}

// IsNotMounted reports an unmount error that means there was nothing to unmount.
func IsNotMounted(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOENT)
}
