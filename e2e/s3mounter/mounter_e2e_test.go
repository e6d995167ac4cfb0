//go:build e2e

package s3mounter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3server"
	"github.com/stowage-csi/stowage/shared/mountproto"
)

// TestE2ES3MounterServesTheBucket runs a Mountpoint Pod's life: the node mounts /dev/fuse and sends the fd;
// the mounter (uid 1000) runs s3-fuse as mount-s3 on it with only the sent environment; writes land in the
// bucket; SIGTERM (a node drain) changes nothing; mount.exit and the node's unmount end it with exit 0.
func TestE2ES3MounterServesTheBucket(t *testing.T) {
	srv := s3server.Start(t)
	ctx := context.Background()
	bucket := newBucket(t, srv)
	if err := srv.PutObject(ctx, bucket, "hello.txt", []byte("from S3")); err != nil {
		t.Fatal(err)
	}
	p, fuseDev := startPod(t)
	args, env := request(srv)
	p.send(t, fuseDev, bucket, args, env)

	readHello := func(context.Context) (bool, error) {
		b, err := os.ReadFile(filepath.Join(p.source, "hello.txt"))
		if err != nil {
			return false, err
		}
		if string(b) != "from S3" {
			return false, fmt.Errorf("read %q, want %q", b, "from S3")
		}
		return true, nil
	}
	rig.Eventually(t, p.whileRunning(t), 30*time.Second, "a read through the fd-passed mount", readHello)
	if err := os.WriteFile(filepath.Join(p.source, "written.txt"), []byte("through s3-mounter"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := srv.GetObject(ctx, bucket, "written.txt"); err != nil || string(got) != "through s3-mounter" {
		t.Fatalf("object written through the mount = %q, %v", got, err)
	}

	// Both run as the Pod's user, and Mountpoint has the sent environment, nothing of the mounter's.
	child, err := childOf(p.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{p.cmd.Process.Pid, child} {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("\nUid:\t%d\t%d\t%d\t%d\n", podUID, podUID, podUID, podUID); !strings.Contains(string(status), want) {
			t.Errorf("pid %d does not run as uid %d:\n%s", pid, podUID, status)
		}
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", child))
	if err != nil {
		t.Fatal(err)
	}
	gotEnv := strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
	if !slices.Equal(gotEnv, env) {
		t.Errorf("mount-s3's environment = %q, want exactly %q", gotEnv, env)
	}
	fd3, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/3", child))
	if err != nil || fd3 != "/dev/fuse" {
		t.Errorf("mount-s3's fd 3 = %q, %v; want /dev/fuse", fd3, err)
	}

	// A drain: the runtime sends SIGTERM to the container's process. The mounter says it ignores it, and
	// the mount keeps serving reads and writes.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, p.whileRunning(t), 10*time.Second, "the mounter to log the ignored SIGTERM", func(context.Context) (bool, error) {
		return strings.Contains(p.output.String(), "Ignoring signal"), nil
	})
	if err := os.WriteFile(filepath.Join(p.source, "after-sigterm.txt"), []byte("still here"), 0o644); err != nil {
		t.Fatalf("write after SIGTERM: %v", err)
	}
	if got, err := srv.GetObject(ctx, bucket, "after-sigterm.txt"); err != nil || string(got) != "still here" {
		t.Fatalf("object written after SIGTERM = %q, %v", got, err)
	}
	if ok, err := readHello(ctx); !ok {
		t.Fatalf("read after SIGTERM: %v", err)
	}

	// The node's teardown: mount.exit, then unmount the source; Mountpoint ends and the Pod succeeds.
	if err := os.WriteFile(filepath.Join(p.comm, mountproto.ExitName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Unmount(p.source, 0); err != nil {
		t.Fatalf("umount %s: %v", p.source, err)
	}
	if code := p.exitCode(t, 20*time.Second); code != 0 {
		t.Errorf("s3-mounter exit code = %d, want 0", code)
	}
	if _, err := os.Stat(filepath.Join(p.comm, mountproto.ErrorName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("mount.err after a clean exit: %v", err)
	}
}

// TestE2ES3MounterReportsAMissingBucket: Mountpoint fails at start, and the node finds the reason in
// mount.err (0600, owned by the Pod's user) while the container exits 1 to be restarted.
func TestE2ES3MounterReportsAMissingBucket(t *testing.T) {
	srv := s3server.Start(t)
	p, fuseDev := startPod(t)
	args, env := request(srv)
	p.send(t, fuseDev, "no-such-bucket", args, env)
	if code := p.exitCode(t, 60*time.Second); code != 1 {
		t.Errorf("s3-mounter exit code = %d, want 1", code)
	}
	errFile := filepath.Join(p.comm, mountproto.ErrorName)
	fi, err := os.Stat(errFile)
	if err != nil {
		t.Fatalf("mount.err: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mount.err mode = %v, want 0600", fi.Mode().Perm())
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != podUID {
		t.Errorf("mount.err owner = %d, want %d", st.Uid, podUID)
	}
	b, err := os.ReadFile(errFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("mount.err:\n%s", b)
	for _, want := range []string{"bucket no-such-bucket is not accessible", "exit status 1"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("mount.err = %q, want it to contain %q", b, want)
		}
	}
}
