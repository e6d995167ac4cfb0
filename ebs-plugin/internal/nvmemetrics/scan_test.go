package nvmemetrics

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeNode lays out a sysfs block class and a mount table in a temporary directory.
type fakeNode struct {
	t   *testing.T
	sys *System
}

func newFakeNode(t *testing.T) *fakeNode {
	root := t.TempDir()
	sys := &System{MountInfo: filepath.Join(root, "mountinfo"), SysBlock: filepath.Join(root, "class", "block"), Dev: "/dev"}
	if err := os.MkdirAll(sys.SysBlock, 0o755); err != nil {
		t.Fatal(err)
	}
	return &fakeNode{t: t, sys: sys}
}

func (n *fakeNode) write(path, content string) {
	n.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

func (n *fakeNode) link(target, link string) {
	n.t.Helper()
	if err := os.Symlink(target, link); err != nil {
		n.t.Fatal(err)
	}
}

// disk adds an NVMe controller with one namespace disk and the given partitions, as the kernel lays them
// out: the disk's device link points at the controller, which holds model and serial (space-padded).
func (n *fakeNode) disk(ctrl, disk, model, serial string, partitions ...string) {
	devices := filepath.Join(filepath.Dir(filepath.Dir(n.sys.SysBlock)), "devices", ctrl)
	n.write(filepath.Join(devices, "model"), model+"      \n")
	n.write(filepath.Join(devices, "serial"), serial+"  \n")
	n.write(filepath.Join(devices, disk, "size"), "2097152\n")
	n.link("..", filepath.Join(devices, disk, "device"))
	n.link(filepath.Join(devices, disk), filepath.Join(n.sys.SysBlock, disk))
	for _, p := range partitions {
		n.write(filepath.Join(devices, disk, p, "partition"), "1\n")
		n.link(filepath.Join(devices, disk, p), filepath.Join(n.sys.SysBlock, p))
	}
}

func TestDevicesAreTheEBSDisksBehindCSIMounts(t *testing.T) {
	n := newFakeNode(t)
	n.disk("nvme0", "nvme0n1", "Amazon Elastic Block Store", "vol0000000000000000a", "nvme0n1p1")
	n.disk("nvme1", "nvme1n1", "Amazon Elastic Block Store", "vol0a1b2c3d4e5f60718", "nvme1n1p1")
	n.disk("nvme2", "nvme2n1", "Amazon EC2 NVMe Instance Storage", "AWS1234567890ABCDEF")
	n.disk("nvme3", "nvme3n1", "Amazon Elastic Block Store", "vol0ffffffffffffffff")
	const kubelet = "/var/lib/kubelet"
	n.write(n.sys.MountInfo, strings.Join([]string{
		// The root volume: EBS, but not the driver's.
		"22 1 259:1 / / rw,noatime shared:1 - xfs /dev/nvme0n1p1 rw",
		// A partition staged and published to a pod (no optional field, then two): its disk, once.
		"40 22 259:5 / " + kubelet + "/plugins/kubernetes.io/csi/ebs.csi.aws.com/0f1e/globalmount rw - ext4 /dev/nvme1n1p1 rw",
		"41 22 259:5 / " + kubelet + "/pods/u1/volumes/kubernetes.io~csi/pvc-1/mount rw shared:7 master:3 - ext4 /dev/nvme1n1p1 rw",
		// Instance storage under a CSI directory (another driver's): not EBS.
		"42 22 259:6 / " + kubelet + "/plugins/kubernetes.io/csi/local.csi.example.com/aa/globalmount rw shared:8 - ext4 /dev/nvme2n1 rw",
		// A block volume: the device node bind-mounted from devtmpfs.
		"43 22 0:5 /nvme3n1 " + kubelet + "/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-3/u3 rw shared:9 - devtmpfs udev rw",
		// Gone from sysfs since: skipped.
		"44 22 259:9 / " + kubelet + "/plugins/kubernetes.io/csi/ebs.csi.aws.com/9f9f/globalmount rw - ext4 /dev/nvme9n1 rw",
		// A loop device under a CSI directory: not NVMe.
		"45 22 7:0 / " + kubelet + "/plugins/kubernetes.io/csi/ebs.csi.aws.com/7a7a/globalmount rw - ext4 /dev/loop0 rw",
		"malformed line",
	}, "\n")+"\n")

	got, err := n.sys.Devices()
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{{Path: "/dev/nvme1n1", VolumeID: "vol-0a1b2c3d4e5f60718"}, {Path: "/dev/nvme3n1", VolumeID: "vol-0ffffffffffffffff"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Devices = %+v, want %+v", got, want)
	}
}

func TestDevicesWithoutCSIMountsAreNone(t *testing.T) {
	n := newFakeNode(t)
	n.disk("nvme0", "nvme0n1", "Amazon Elastic Block Store", "vol0000000000000000a")
	n.write(n.sys.MountInfo, "22 1 259:1 / / rw shared:1 - xfs /dev/nvme0n1 rw\n")
	got, err := n.sys.Devices()
	if err != nil || len(got) != 0 {
		t.Fatalf("Devices = %+v, %v; want none and no error", got, err)
	}
}

func TestDevicesFailWhenTheMountTableOrSysfsCannotBeRead(t *testing.T) {
	n := newFakeNode(t)
	if _, err := n.sys.Devices(); err == nil || !strings.Contains(err.Error(), "mount table") {
		t.Fatalf("Devices without a mount table = %v, want an error naming it", err)
	}
	// A disk whose controller has no model attribute.
	n.write(filepath.Join(n.sys.SysBlock, "..", "..", "devices", "nvme1n1", "size"), "1\n")
	n.link(filepath.Join(n.sys.SysBlock, "..", "..", "devices", "nvme1n1"), filepath.Join(n.sys.SysBlock, "nvme1n1"))
	n.write(n.sys.MountInfo, "40 22 259:5 / /var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/0f1e/globalmount rw - ext4 /dev/nvme1n1 rw\n")
	if _, err := n.sys.Devices(); err == nil || !strings.Contains(err.Error(), "model of nvme1n1") {
		t.Fatalf("Devices without a model = %v, want an error naming the attribute and disk", err)
	}
}

func TestVolumeIDFromSerial(t *testing.T) {
	for serial, want := range map[string]string{
		"vol0a1b2c3d4e5f60718":  "vol-0a1b2c3d4e5f60718",
		"vol-0a1b2c3d4e5f60718": "vol-0a1b2c3d4e5f60718",
		"AWS1234":               "AWS1234",
	} {
		if got := volumeID(serial); got != want {
			t.Errorf("volumeID(%q) = %q, want %q", serial, got, want)
		}
	}
}
