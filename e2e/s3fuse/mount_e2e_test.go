//go:build e2e

package s3fuse

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3server"
)

// TestE2EReadOnlyMount checks --read-only: reads work, every change is EROFS.
func TestE2EReadOnlyMount(t *testing.T) {
	srv := s3server.Start(t)
	bucket := newBucket(t, srv)
	if err := srv.PutObject(context.Background(), bucket, "r.txt", []byte("ro")); err != nil {
		t.Fatal(err)
	}
	m := mountBucket(t, srv, bucket, "--read-only")
	if b, err := os.ReadFile(filepath.Join(m.Dir, "r.txt")); err != nil || string(b) != "ro" {
		t.Fatalf("read = %q, %v", b, err)
	}
	for name, op := range map[string]func() error{
		"create": func() error { return os.WriteFile(filepath.Join(m.Dir, "new"), []byte("x"), 0o644) },
		"mkdir":  func() error { return os.Mkdir(filepath.Join(m.Dir, "d"), 0o755) },
		"unlink": func() error { return os.Remove(filepath.Join(m.Dir, "r.txt")) },
		"trunc":  func() error { return os.WriteFile(filepath.Join(m.Dir, "r.txt"), []byte("x"), 0o644) },
	} {
		if err := op(); !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s on a read-only mount: %v, want EROFS", name, err)
		}
	}
}

// TestE2EOwnershipAndModes checks --uid, --gid, --dir-mode and --file-mode on files and directories.
func TestE2EOwnershipAndModes(t *testing.T) {
	srv := s3server.Start(t)
	bucket := newBucket(t, srv)
	if err := srv.PutObject(context.Background(), bucket, "d/f.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	m := mountBucket(t, srv, bucket, "--uid", "1234", "--gid=2345", "--dir-mode", "750", "--file-mode", "640", "--allow-other")
	for path, want := range map[string]os.FileMode{
		m.Dir:                           os.ModeDir | 0o750,
		filepath.Join(m.Dir, "d"):       os.ModeDir | 0o750,
		filepath.Join(m.Dir, "d/f.txt"): 0o640,
	} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		if st.Mode() != want || sys.Uid != 1234 || sys.Gid != 2345 {
			t.Errorf("%s: mode %v uid %d gid %d, want %v 1234 2345", path, st.Mode(), sys.Uid, sys.Gid, want)
		}
	}
	// With default_permissions the kernel enforces these modes: uid 65534 (other) may not read 640 files.
	cmd := exec.Command("cat", filepath.Join(m.Dir, "d/f.txt"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("uid 65534 read a 0640 file owned by 1234:2345: %s", out)
	}
	cmd = exec.Command("cat", filepath.Join(m.Dir, "d/f.txt"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1234, Gid: 2345}}
	if out, err := cmd.CombinedOutput(); err != nil || string(out) != "x" {
		t.Errorf("owner uid 1234 could not read its file: %s %v", out, err)
	}
}

// TestE2EBadStartFailsBeforeMounting checks that bad options and a missing bucket end s3-fuse with a
// non-zero status and a one-line reason, and that nothing gets mounted.
func TestE2EBadStartFailsBeforeMounting(t *testing.T) {
	srv := s3server.Start(t)
	bucket := newBucket(t, srv)
	dir := t.TempDir()
	tests := []struct {
		name, want string
		args       []string
	}{
		{"unknown option", "--no-such-option", s3fuseArgs(srv, bucket, dir, "--no-such-option")},
		{"bad prefix", "must end with '/'", s3fuseArgs(srv, bucket, dir, "--prefix", "p")},
		{"missing mountpoint", "positional", []string{bucket}},
		{"missing bucket", "not accessible", s3fuseArgs(srv, "no-such-bucket", dir)},
		{"wrong secret", "not accessible", s3fuseArgs(srv, bucket, dir)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, tc.args...)
			cmd.Env = srv.Env()
			if tc.name == "wrong secret" {
				cmd.Env = append(cmd.Env, "AWS_SECRET_ACCESS_KEY=wrong")
			}
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("exit: %v, want a non-zero status; output %s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Errorf("output %q: want one line mentioning %q", out, tc.want)
			}
			if isMounted(dir) {
				_ = syscall.Unmount(dir, syscall.MNT_DETACH)
				t.Fatal("mounted although start-up failed")
			}
		})
	}
}

// TestE2ESigtermUnmounts checks that SIGTERM unmounts and ends s3-fuse with status 0, and that an
// external umount ends it too.
func TestE2ESigtermUnmounts(t *testing.T) {
	srv := s3server.Start(t)
	bucket := newBucket(t, srv)
	for _, how := range []string{"SIGTERM", "umount"} {
		t.Run(how, func(t *testing.T) {
			m := mountBucket(t, srv, bucket)
			if how == "SIGTERM" {
				if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			} else if err := syscall.Unmount(m.Dir, 0); err != nil {
				t.Fatal(err)
			}
			select {
			case <-m.done:
			case <-time.After(20 * time.Second):
				t.Fatalf("s3-fuse still running 20s after %s", how)
			}
			if code := m.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("exit status %d after %s, want 0: %s", code, how, m.output.String())
			}
			if isMounted(m.Dir) {
				t.Errorf("still mounted after %s", how)
			}
		})
	}
}

// TestE2EBackgroundModeReturnsOnceMounted runs s3-fuse without --foreground, as mount-s3 is usually
// run: the command returns 0 once the bucket is mounted, and the background process ends on umount.
func TestE2EBackgroundModeReturnsOnceMounted(t *testing.T) {
	srv := s3server.Start(t)
	bucket := newBucket(t, srv)
	if err := srv.PutObject(context.Background(), bucket, "bg.txt", []byte("bg")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Cleanup(func() {
		if isMounted(dir) {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	args := []string{bucket, dir, "--endpoint-url", srv.Endpoint, "--force-path-style"}
	cmd := exec.Command(binary, args...)
	cmd.Env = srv.Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("s3-fuse: %v: %s", err, out)
	}
	pid := fuseServerPID(t, dir)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if b, err := os.ReadFile(filepath.Join(dir, "bg.txt")); err != nil || string(b) != "bg" {
		t.Fatalf("read through the background mount: %q, %v", b, err)
	}
	if err := syscall.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	// On failure the cleanup above kills the process.
	rig.Eventually(t, context.Background(), 20*time.Second, fmt.Sprintf("background s3-fuse (pid %d) to exit after umount", pid), func(context.Context) (bool, error) {
		return syscall.Kill(pid, 0) != nil, nil
	})
}

// fuseServerPID finds the s3-fuse process serving dir (its command line names dir).
func fuseServerPID(t *testing.T, dir string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 2 && args[0] == binary && args[2] == dir {
			var pid int
			if _, err := fmt.Sscanf(filepath.Base(filepath.Dir(p)), "%d", &pid); err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no s3-fuse process serves %s", dir)
	return 0
}

// TestE2EMetadataTTL checks --metadata-ttl: with "indefinite" a changed or deleted object keeps its
// cached metadata; with "minimal" every stat sees S3's current state.
func TestE2EMetadataTTL(t *testing.T) {
	srv := s3server.Start(t)
	ctx := context.Background()
	bucket := newBucket(t, srv)
	if err := srv.PutObject(ctx, bucket, "m.txt", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	cached := mountBucket(t, srv, bucket, "--metadata-ttl", "indefinite")
	fresh := mountBucket(t, srv, bucket, "--metadata-ttl", "minimal")
	size := func(m *mount) (int64, error) {
		st, err := os.Stat(filepath.Join(m.Dir, "m.txt"))
		if err != nil {
			return 0, err
		}
		return st.Size(), nil
	}
	for _, m := range []*mount{cached, fresh} {
		if n, err := size(m); err != nil || n != 2 {
			t.Fatalf("first stat: %d, %v", n, err)
		}
	}
	if err := srv.PutObject(ctx, bucket, "m.txt", []byte("version2")); err != nil {
		t.Fatal(err)
	}
	if n, err := size(cached); err != nil || n != 2 {
		t.Errorf("indefinite TTL: size %d, %v after the object changed; want the cached 2", n, err)
	}
	if n, err := size(fresh); err != nil || n != 8 {
		t.Errorf("minimal TTL: size %d, %v after the object changed; want 8", n, err)
	}
	if _, err := srv.Client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: strPtr("m.txt")}); err != nil {
		t.Fatal(err)
	}
	if _, err := size(fresh); !os.IsNotExist(err) {
		t.Errorf("minimal TTL: stat after delete: %v, want ENOENT", err)
	}
	if _, err := size(cached); err != nil {
		t.Errorf("indefinite TTL: stat after delete: %v, want the cached entry", err)
	}
}
