// Package testutil holds the s3-node tests' fakes: an in-memory mount table behind mounter.Syscalls.
package testutil

import (
	"fmt"
	"path/filepath"
	"sync"
	"syscall"

	mountutils "k8s.io/mount-utils"
)

// Call is one recorded privileged call.
type Call struct {
	Op, Path, Source string
	ReadOnly         bool
	AllowOther       bool
}

// FakeSys is an in-memory mounter.Syscalls: mounts are table entries, binds share their source's device.
type FakeSys struct {
	mu      sync.Mutex
	mounts  []mountutils.MountInfo
	nextDev int
	nextFd  int
	open    map[int]bool
	calls   []Call
	// StatErr makes Stat of a path fail.
	StatErr map[string]error
	// OnStat, if set, is called with the path of each Stat before it answers, outside the table's lock, so a
	// test can hold a stat as a hung FUSE server does; an error it returns is Stat's answer.
	OnStat func(path string) error
	// OnUnmount, if set, is called with the target of each Unmount before the mount goes, so a test can
	// look at the world at that moment.
	OnUnmount func(target string)
}

// NewFakeSys returns an empty table.
func NewFakeSys() *FakeSys {
	return &FakeSys{open: map[int]bool{}, nextFd: 100, StatErr: map[string]error{}}
}

func (f *FakeSys) record(c Call) { f.calls = append(f.calls, c) }

// Calls returns the calls made so far.
func (f *FakeSys) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// OpenFds is the number of fds opened and not closed.
func (f *FakeSys) OpenFds() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.open)
}

func (f *FakeSys) OpenFUSE() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextFd++
	f.open[f.nextFd] = true
	return f.nextFd, nil
}

func (f *FakeSys) CloseFd(fd int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.open, fd)
	return nil
}

func (f *FakeSys) MountFUSE(target string, fd int, readOnly, allowOther bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.open[fd] {
		return fmt.Errorf("fd %d not open", fd)
	}
	f.nextDev++
	f.mounts = append(f.mounts, mountutils.MountInfo{MountPoint: filepath.Clean(target), Source: "mountpoint-s3", FsType: "fuse", Minor: f.nextDev})
	f.record(Call{Op: "mountfuse", Path: target, ReadOnly: readOnly, AllowOther: allowOther})
	return nil
}

// AddMount puts an entry in the table as if something else had mounted it.
func (f *FakeSys) AddMount(m mountutils.MountInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mounts = append(f.mounts, m)
}

func (f *FakeSys) Bind(source, target string, readOnly bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.mounts {
		if m.MountPoint == filepath.Clean(source) {
			m.MountPoint = filepath.Clean(target)
			f.mounts = append(f.mounts, m)
			f.record(Call{Op: "bind", Path: target, Source: source, ReadOnly: readOnly})
			return nil
		}
	}
	return fmt.Errorf("bind: %s not mounted", source)
}

func (f *FakeSys) Unmount(target string, flags int) error {
	if f.OnUnmount != nil {
		f.OnUnmount(target)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.mounts) - 1; i >= 0; i-- {
		if f.mounts[i].MountPoint == filepath.Clean(target) {
			f.mounts = append(f.mounts[:i], f.mounts[i+1:]...)
			f.record(Call{Op: "unmount", Path: target})
			return nil
		}
	}
	return syscall.EINVAL
}

func (f *FakeSys) Stat(path string) error {
	if f.OnStat != nil {
		if err := f.OnStat(path); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.StatErr[path]
}

func (f *FakeSys) Mounts() ([]mountutils.MountInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]mountutils.MountInfo(nil), f.mounts...), nil
}

// MountPoints lists the mount points in the table.
func (f *FakeSys) MountPoints() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range f.mounts {
		out = append(out, m.MountPoint)
	}
	return out
}
