//go:build e2e

package s3mounter

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3server"
	"github.com/stowage-csi/stowage/shared/mountproto"
)

// podUID is the Mountpoint Pod's user upstream (runAsUser 1000).
const podUID = 1000

// binaries built once by TestMain.
type binaries struct {
	mounter string // s3-mounter
	mountS3 string // s3-fuse as mount-s3
}

// bins is set by TestMain before any test runs and only read afterwards.
var bins binaries

func TestMain(m *testing.M) {
	// The image's layout: Stowage's filesystem under Mountpoint's name, in a folder of its own.
	os.Exit(rig.RunWithCommands(m, []rig.Command{{Module: "s3-mounter", Name: "s3-mounter"}, {Module: "s3-mounter", Name: "s3-fuse", As: "mount-s3"}},
		&bins.mounter, &bins.mountS3))
}

// pod is one Mountpoint Pod: its comm directory, the FUSE mount the "node" made, and the mounter.
type pod struct {
	comm   string
	source string // where the node mounted /dev/fuse
	cmd    *exec.Cmd
	done   chan struct{}
	output *rig.LockedBuffer
}

// startPod makes a comm directory owned by the Pod's user, starts s3-mounter in it as that user, and
// mounts /dev/fuse as the node plugin does. Cleanup kills the mounter and everything it started (it
// ignores SIGTERM) and unmounts.
func startPod(t *testing.T) (*pod, *os.File) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts FUSE itself and starts processes as another user: run it as root")
	}
	p := &pod{comm: t.TempDir(), source: t.TempDir(), done: make(chan struct{}), output: &rig.LockedBuffer{}}
	// t.TempDir's parent is 0700; the Pod's user must reach the comm directory.
	if err := os.Chmod(filepath.Dir(p.comm), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p.comm, podUID, podUID); err != nil {
		t.Fatal(err)
	}
	fuseDev := mountFuse(t, p.source)

	p.cmd = exec.Command(bins.mounter, "--comm-dir", p.comm, "--mountpoint-bin-dir", filepath.Dir(bins.mountS3),
		"--mount-sock-recv-timeout", "60s", "-v=2")
	// The mounter's own environment; the test checks that none of it reaches Mountpoint.
	p.cmd.Env = []string{"PATH=/usr/bin:/bin", "MOUNTER_ONLY=1"}
	p.cmd.Dir = p.comm
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	p.cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: podUID, Gid: podUID},
		// Its own group, so cleanup reaches mount-s3 too; SIGKILL if the test binary dies.
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("s3-mounter output:\n%s", p.output.String())
		}
	})
	return p, fuseDev
}

// mountFuse opens /dev/fuse and mounts it at dir exactly as the node plugin does (source mountpoint-s3,
// fd=N, the caller's uid and gid, default_permissions, allow_other for --allow-other).
func mountFuse(t *testing.T, dir string) *os.File {
	t.Helper()
	fuseDev, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fuseDev.Close() })
	data := fmt.Sprintf("fd=%d,rootmode=%o,user_id=%d,group_id=%d,default_permissions,allow_other",
		fuseDev.Fd(), syscall.S_IFDIR, os.Geteuid(), os.Getegid())
	if err := syscall.Mount("mountpoint-s3", dir, "fuse", syscall.MS_NODEV|syscall.MS_NOSUID|syscall.MS_NOATIME, data); err != nil {
		t.Fatalf("mount(2) fuse at %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if isMounted(dir) {
			if err := syscall.Unmount(dir, 0); err != nil {
				_ = syscall.Unmount(dir, syscall.MNT_DETACH)
			}
		}
	})
	return fuseDev
}

// send hands the mount to the Pod as the node does, and closes the test's copy of the fd as the node
// closes its own.
func (p *pod) send(t *testing.T, fuseDev *os.File, bucket string, args, env []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := mountproto.Send(ctx, filepath.Join(p.comm, mountproto.SocketName), mountproto.Options{
		Fd: int(fuseDev.Fd()), BucketName: bucket, Args: args, Env: env,
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = fuseDev.Close()
}

// exitCode waits for the mounter to exit and returns its exit code.
func (p *pod) exitCode(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("s3-mounter still running after %s", within)
		return -1
	}
}

// whileRunning returns a context that ends when the mounter exits, so a wait for something it should do
// stops as soon as that can no longer happen.
func (p *pod) whileRunning(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx
}

// request is what the node plugin sends for a bucket on srv: mount-s3's arguments, sorted, and only the
// credentials in the environment.
func request(srv *s3server.Server, extra ...string) (args, env []string) {
	args = append([]string{"--allow-delete", "--allow-other", "--endpoint-url=" + srv.Endpoint, "--force-path-style"}, extra...)
	for _, kv := range srv.Env() {
		if strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	return args, env
}

func newBucket(t *testing.T, srv *s3server.Server) string {
	t.Helper()
	name := fmt.Sprintf("b-%d", time.Now().UnixNano())
	if err := srv.CreateBucket(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return name
}

func isMounted(dir string) bool {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == dir {
			return true
		}
	}
	return false
}

// childOf returns the pid of a child of pid (the mounter's mount-s3). /proc/<pid>/task/*/children would
// miss children forked by another of Go's threads, so it reads every process's parent.
func childOf(pid int) (int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces, so split after its closing parenthesis.
		rest := string(b[bytes.LastIndexByte(b, ')')+1:])
		var state string
		var child, ppid int
		if _, err := fmt.Sscan(rest, &state, &ppid); err != nil || ppid != pid {
			continue
		}
		if _, err := fmt.Sscan(filepath.Base(filepath.Dir(path)), &child); err == nil {
			return child, nil
		}
	}
	return 0, fmt.Errorf("no child of %d", pid)
}
