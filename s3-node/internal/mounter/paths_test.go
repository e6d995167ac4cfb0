package mounter

import (
	"testing"

	mountutils "k8s.io/mount-utils"
)

func TestParseTarget(t *testing.T) {
	uid, pv, err := ParseTarget("/var/lib/kubelet/pods/0f1e/volumes/kubernetes.io~csi/pv-a/mount/")
	if err != nil || uid != "0f1e" || pv != "pv-a" {
		t.Fatalf("ParseTarget = %q %q %v", uid, pv, err)
	}
	for _, bad := range []string{"/tmp/x", "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv/mount/sub", "/pods/u/volumes/kubernetes.io~empty-dir/pv/mount"} {
		if _, _, err := ParseTarget(bad); err == nil {
			t.Errorf("ParseTarget(%q) accepted", bad)
		}
	}
	p := Paths{Kubelet: "/k"}
	if got := p.CommDir("uid"); got != "/k/pods/uid/volumes/kubernetes.io~empty-dir/comm" {
		t.Errorf("CommDir = %s", got)
	}
	if got := p.Source("mp-1"); got != "/k/plugins/s3.csi.aws.com/mnt/mp-1" {
		t.Errorf("Source = %s", got)
	}
}

type table []mountutils.MountInfo

func TestBindMountsAndIsS3Mount(t *testing.T) {
	sys := fakeTable{
		{MountPoint: "/src", Source: "mountpoint-s3", FsType: "fuse", Major: 0, Minor: 50},
		{MountPoint: "/t1", Source: "mountpoint-s3", FsType: "fuse", Major: 0, Minor: 50},
		{MountPoint: "/other", Source: "mountpoint-s3", FsType: "fuse", Major: 0, Minor: 51},
		{MountPoint: "/ext4", Source: "/dev/sda", FsType: "ext4", Major: 8, Minor: 1},
	}
	binds, _ := BindMounts(sys, "/src")
	if len(binds) != 1 || binds[0] != "/t1" {
		t.Errorf("BindMounts = %v", binds)
	}
	if ok, _ := IsS3Mount(sys, "/t1"); !ok {
		t.Error("/t1 is not seen as a Mountpoint mount")
	}
	if ok, _ := IsS3Mount(sys, "/ext4"); ok {
		t.Error("/ext4 is seen as a Mountpoint mount")
	}
	if binds, _ := BindMounts(sys, "/none"); len(binds) != 0 {
		t.Errorf("BindMounts of an unmounted path = %v", binds)
	}
}

// fakeTable is a Syscalls with only a mount table.
type fakeTable table

func (f fakeTable) Mounts() ([]mountutils.MountInfo, error) { return f, nil }
func (fakeTable) OpenFUSE() (int, error)                    { return 0, nil }
func (fakeTable) CloseFd(int) error                         { return nil }
func (fakeTable) MountFUSE(string, int, bool, bool) error   { return nil }
func (fakeTable) Bind(string, string, bool) error           { return nil }
func (fakeTable) Unmount(string, int) error                 { return nil }
func (fakeTable) Stat(string) error                         { return nil }
