//go:build e2e

package s3fuse

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3server"
)

// TestE2EFDPassingToAnUnprivilegedServer does what the S3 CSI node plugin and the Mountpoint pod do:
// the test (root) opens /dev/fuse, mounts it, and starts s3-fuse as uid 65534 with the fd as fd 3 and
// "/dev/fd/3" as the mountpoint (the Mountpoint pod's `mount-s3 <bucket> /dev/fd/3 --foreground ...`).
// Reads and writes go through the mount; then the parent unmounts and s3-fuse exits.
func TestE2EFDPassingToAnUnprivilegedServer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts FUSE itself and must run as root")
	}
	srv := s3server.Start(t)
	ctx := context.Background()
	bucket := newBucket(t, srv)
	if err := srv.PutObject(ctx, bucket, "hello.txt", []byte("from S3")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	fuseDev, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fuseDev.Close()
	data := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fuseDev.Fd())
	if err := syscall.Mount("mountpoint-s3", dir, "fuse", syscall.MS_NOSUID|syscall.MS_NODEV, data); err != nil {
		t.Fatalf("mount(2) fuse: %v", err)
	}
	t.Cleanup(func() { _ = unmount(dir) })
	cmd := exec.Command(binary, bucket, "/dev/fd/3", "--foreground", "--endpoint-url", srv.Endpoint,
		"--force-path-style", "--allow-other", "--uid", "0", "--gid", "0")
	cmd.Env = srv.Env()
	cmd.ExtraFiles = []*os.File{fuseDev}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	c := startClient(t, cmd)
	t.Cleanup(func() {
		c.reap(10 * time.Second)
		if t.Failed() {
			t.Logf("s3-fuse output:\n%s", c.output.String())
		}
	})
	// The parent keeps no copy of the fd, as the node plugin closes its own after sending it.
	_ = fuseDev.Close()

	// The mount exists before s3-fuse serves it: reads fail until s3-fuse has taken the fd over.
	rig.Eventually(t, c.whileRunning(t), 30*time.Second, "a read through the fd-passed mount", func(context.Context) (bool, error) {
		b, err := os.ReadFile(filepath.Join(dir, "hello.txt"))
		if err != nil {
			return false, err
		}
		if string(b) != "from S3" {
			return false, fmt.Errorf("read %q, want %q", b, "from S3")
		}
		return true, nil
	})
	if err := os.WriteFile(filepath.Join(dir, "written.txt"), []byte("by uid 65534"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := srv.GetObject(ctx, bucket, "written.txt"); err != nil || string(got) != "by uid 65534" {
		t.Fatalf("S3 object written through the mount = %q, %v", got, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if !containsLine(string(status), "Uid:\t65534\t65534\t65534\t65534") {
		t.Errorf("s3-fuse does not run as uid 65534:\n%s", status)
	}
	if err := syscall.Unmount(dir, 0); err != nil {
		t.Fatalf("umount: %v", err)
	}
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		t.Fatal("s3-fuse still running 20s after the parent unmounted")
	}
}

func containsLine(text, line string) bool {
	for len(text) > 0 {
		i := 0
		for i < len(text) && text[i] != '\n' {
			i++
		}
		if text[:i] == line {
			return true
		}
		if i == len(text) {
			break
		}
		text = text[i+1:]
	}
	return false
}
