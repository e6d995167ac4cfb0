//go:build e2e

package ec2sim

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// loopsBackedBy lists the loop devices whose backing file lies under dir.
func loopsBackedBy(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), dir) {
			out = append(out, filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return out
}

// waitNoLoops waits until no loop device is backed by a file under dir: the kernel's autoclear detaches a
// device only once its last user has closed it.
func waitNoLoops(t *testing.T, dir, what string) {
	t.Helper()
	rig.Eventually(t, ctxT(t), waitTimeout, what, func(context.Context) (bool, error) {
		if loops := loopsBackedBy(t, dir); len(loops) > 0 {
			return false, fmt.Errorf("still bound: %v", loops)
		}
		return true, nil
	})
}

// deviceSize is a block device's size, as lseek(SEEK_END) reports it.
func deviceSize(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func attachAndWait(t *testing.T, c *ec2.Client, vol, dev string) {
	t.Helper()
	if err := attach(c, t, vol, testInstance, dev); err != nil {
		t.Fatal(err)
	}
	waitAttached(t, c, vol, testInstance)
}

// writeDevice writes data at off through a block device and syncs it, as a filesystem on the node would.
func writeDevice(t *testing.T, path string, off int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// readDevice reads n bytes at off from a block device.
func readDevice(t *testing.T, path string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return b
}

// detachLeavesNoDevice detaches the volume and checks that its link and loop device went with it.
func detachLeavesNoDevice(t *testing.T, c *ec2.Client, dir, vol, link string) {
	t.Helper()
	dev, _ := os.Readlink(link)
	if _, err := c.DetachVolume(ctxT(t), &ec2.DetachVolumeInput{VolumeId: aws.String(vol), InstanceId: aws.String(testInstance)}); err != nil {
		t.Fatal(err)
	}
	waitVolumeState(t, c, vol, types.VolumeStateAvailable)
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("link %s still there after detach (%v)", link, err)
	}
	for _, l := range loopsBackedBy(t, dir) {
		if "/dev/"+l == dev {
			t.Errorf("%s still bound after detach", dev)
		}
	}
}

func TestE2ELoopDeviceDataPath(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, TimeScale: 0.01, Instances: []Instance{{ID: testInstance, Zone: testZone, Type: "m5.large", Local: true}}}
	linkDir := filepath.Join(dir, "dev", "disk", "by-id")
	t.Cleanup(func() {
		if left := loopsBackedBy(t, dir); len(left) > 0 {
			t.Errorf("loop devices left behind: %v", left)
		}
	})
	s := startConfig(t, cfg)
	c := newClient(t, s)
	ctx := ctxT(t)

	vol := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1)})
	attachAndWait(t, c, vol, "/dev/xvdaa")
	link := filepath.Join(linkDir, LinkName(vol))
	dev, err := os.Readlink(link)
	if err != nil || !strings.HasPrefix(dev, "/dev/loop") {
		t.Fatalf("by-id link %s -> %q, %v", link, dev, err)
	}
	if st := s.State(); len(st.Attachments) != 1 || st.Attachments[0].LoopDevice != dev || st.Attachments[0].Link != link {
		t.Errorf("state %+v", st.Attachments)
	}
	if size := deviceSize(t, link); size != 1<<30 {
		t.Errorf("device size %d", size)
	}

	payload := bytes.Repeat([]byte("stowage!"), 512)
	writeDevice(t, link, 64<<20, payload)

	snap := createSnapshot(t, c, vol)
	waitSnapshot(t, c, snap)
	restored := createVolume(t, c, &ec2.CreateVolumeInput{SnapshotId: aws.String(snap)})
	attachAndWait(t, c, restored, "/dev/xvdab")
	rlink := filepath.Join(linkDir, LinkName(restored))
	if got := readDevice(t, rlink, 64<<20, len(payload)); !bytes.Equal(got, payload) {
		t.Fatalf("restored volume reads %q...", got[:16])
	}

	// Growing an attached volume grows its device.
	if _, err := c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: aws.String(restored), Size: aws.Int32(3)}); err != nil {
		t.Fatal(err)
	}
	waitVolume(t, c, restored, "grown to 3 GiB", func(v types.Volume) bool { return aws.ToInt32(v.Size) == 3 })
	if size := deviceSize(t, rlink); size != 3<<30 {
		t.Errorf("grown device size %d, want %d", size, int64(3<<30))
	}

	detachLeavesNoDevice(t, c, dir, restored, rlink)

	// A restart keeps the attachment: Close takes the device down, Start brings it back with the same data.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left := loopsBackedBy(t, dir); len(left) > 0 {
		t.Fatalf("Close left loop devices %v", left)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("Close left link %s", link)
	}
	s2 := startConfig(t, cfg)
	if _, err := os.Readlink(link); err != nil {
		t.Fatalf("link not re-created after restart: %v", err)
	}
	if got := readDevice(t, link, 64<<20, len(payload)); !bytes.Equal(got, payload) {
		t.Errorf("after restart the device reads %q...", got[:16])
	}
	detachLeavesNoDevice(t, newClient(t, s2), dir, vol, link)
	if left := loopsBackedBy(t, dir); len(left) > 0 {
		t.Errorf("loop devices after detaching everything: %v", left)
	}
}

// A server that dies without Close loses its file descriptors; autoclear takes its devices down with them, and
// the next Start on the data dir brings the attached volumes' devices back.
func TestE2EDevicesGoAwayWithTheirServer(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, TimeScale: 0.01, Instances: []Instance{{ID: testInstance, Zone: testZone, Type: "m5.large", Local: true}}}
	t.Cleanup(func() {
		if left := loopsBackedBy(t, dir); len(left) > 0 {
			t.Errorf("loop devices left behind: %v", left)
		}
	})
	s := startConfig(t, cfg)
	c := newClient(t, s)
	vol := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1)})
	attachAndWait(t, c, vol, "/dev/xvdaa")
	if n := len(loopsBackedBy(t, dir)); n != 1 {
		t.Fatalf("%d loop devices while attached", n)
	}
	// Simulate a crash: the descriptors close without any unbinding, as when the process dies.
	s.mu.Lock()
	for _, d := range s.loops.devs {
		_ = unix.Close(d.fd)
	}
	s.loops.devs = map[string]*loopDev{}
	s.mu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitNoLoops(t, dir, "autoclear after Close")

	startConfig(t, cfg)
	if n := len(loopsBackedBy(t, dir)); n != 1 {
		t.Errorf("%d loop devices after restart, want the re-created one", n)
	}
	if _, err := os.Readlink(filepath.Join(dir, "dev", "disk", "by-id", LinkName(vol))); err != nil {
		t.Errorf("link after restart: %v", err)
	}
}

// The same with the real binary killed by SIGKILL.
func TestE2EKilledEmulatorLeavesNoLoopDevices(t *testing.T) {
	dir := t.TempDir()
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := rig.BuildCommand(context.Background(), root, "e2e", "ec2sim", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--data-dir="+dir, "--time-scale=0.01", "--device-link-dir="+filepath.Join(dir, "by-id"),
		"--instance=id="+testInstance+",zone="+testZone+",type=m5.large,local=true")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if left := loopsBackedBy(t, dir); len(left) > 0 {
			t.Errorf("loop devices left behind: %v", left)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	endpoint, ok := strings.CutPrefix(strings.TrimSpace(line), "EC2_ENDPOINT=")
	if err != nil || !ok {
		t.Fatalf("first output line %q, %v", line, err)
	}
	c := ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SK", "")})
	vol := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1)})
	attachAndWait(t, c, vol, "/dev/xvdaa")
	if n := len(loopsBackedBy(t, dir)); n != 1 {
		t.Fatalf("%d loop devices while attached", n)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitNoLoops(t, dir, "autoclear after SIGKILL")
}

// TestE2EDetachKeepsUnsyncedWrites writes a raw device without syncing, as a Pod's dd on a block volume
// does, closes it and detaches the volume: the write must be in the volume's file, as the node's last close
// of the device writes it back to EBS before the detach.
func TestE2EDetachKeepsUnsyncedWrites(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "vol-1")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, 64<<20); err != nil {
		t.Fatal(err)
	}
	m := newLoopManager(klog.Background(), filepath.Join(dir, "by-id"), dir)
	if err := m.ensure("vol-1", testInstance, file); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = m.releaseAll()
		if left := loopsBackedBy(t, dir); len(left) > 0 {
			t.Errorf("loop devices left behind: %v", left)
		}
	})
	dev, _ := m.device("vol-1")
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte("written through the page cache, never synced")
	if _, err := f.WriteAt(payload, 4096); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.release("vol-1", testInstance); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(payload))
	back, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if _, err := back.ReadAt(got, 4096); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Errorf("after detach the volume's file holds %q, want the write %q", got, payload)
	}
}
