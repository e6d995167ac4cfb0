package mounter

import (
	"path/filepath"

	mountutils "k8s.io/mount-utils"
)

// find returns the mount table entry whose mount point is path (the last one: it is what path shows).
func find(mounts []mountutils.MountInfo, path string) (mountutils.MountInfo, bool) {
	path = filepath.Clean(path)
	var found mountutils.MountInfo
	ok := false
	for _, m := range mounts {
		if m.MountPoint == path {
			found, ok = m, true
		}
	}
	return found, ok
}

// IsS3Mount reports whether path is a mount point of a Mountpoint FUSE filesystem, from the table alone
// (it works on a mount whose server is gone, where stat fails).
func IsS3Mount(sys Syscalls, path string) (bool, error) {
	mounts, err := sys.Mounts()
	if err != nil {
		return false, err
	}
	m, ok := find(mounts, path)
	return ok && isS3(m), nil
}

// IsMountPoint reports whether anything is mounted at path.
func IsMountPoint(sys Syscalls, path string) (bool, error) {
	mounts, err := sys.Mounts()
	if err != nil {
		return false, err
	}
	_, ok := find(mounts, path)
	return ok, nil
}

func isS3(m mountutils.MountInfo) bool {
	return m.Source == FUSESource && (m.FsType == "fuse" || m.FsType == "fuse."+FUSESource)
}

// BindMounts lists the other mount points of the filesystem mounted at source: the workloads' binds.
func BindMounts(sys Syscalls, source string) ([]string, error) {
	mounts, err := sys.Mounts()
	if err != nil {
		return nil, err
	}
	src, ok := find(mounts, source)
	if !ok {
		return nil, nil
	}
	source = filepath.Clean(source)
	var binds []string
	for _, m := range mounts {
		if m.Major == src.Major && m.Minor == src.Minor && m.MountPoint != source {
			binds = append(binds, m.MountPoint)
		}
	}
	return binds, nil
}
