//go:build e2e || bench

package s3fuse

import (
	"bufio"
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

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3server"
)

// binary is the s3-fuse executable built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "s3-fuse-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := rig.RepoRoot(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Unprivileged users (the fd-passing test's uid 65534) must be able to run it.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if binary, err = rig.BuildCommand(context.Background(), root, "s3-mounter", "s3-fuse", dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// fuseClient is a FUSE client running in the foreground with its output collected. The kernel kills it
// if the test binary dies (Pdeathsig).
type fuseClient struct {
	cmd    *exec.Cmd
	done   chan struct{}
	output *rig.LockedBuffer
}

// startClient starts cmd, adding Pdeathsig to whatever SysProcAttr it already has.
func startClient(t testing.TB, cmd *exec.Cmd) *fuseClient {
	t.Helper()
	c := &fuseClient{cmd: cmd, done: make(chan struct{}), output: &rig.LockedBuffer{}}
	cmd.Stdout, cmd.Stderr = c.output, c.output
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	return c
}

// reap waits up to grace for the client to end, then kills it; it tells whether it had to.
func (c *fuseClient) reap(grace time.Duration) (killed bool) {
	select {
	case <-c.done:
		return false
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.done
		return true
	}
}

// unmount unmounts dir if it is mounted, lazily when the plain unmount fails, and returns that failure.
func unmount(dir string) error {
	if !isMounted(dir) {
		return nil
	}
	err := syscall.Unmount(dir, 0)
	if err != nil {
		_ = syscall.Unmount(dir, syscall.MNT_DETACH)
	}
	return err
}

// mount is one running s3-fuse.
type mount struct {
	Dir string
	*fuseClient
}

// s3fuseArgs are the arguments every mount of srv needs.
func s3fuseArgs(srv *s3server.Server, bucket, dir string, extra ...string) []string {
	args := []string{bucket, dir, "--foreground", "--endpoint-url", srv.Endpoint, "--force-path-style"}
	return append(args, extra...)
}

// mountBucket starts s3-fuse on a new directory and waits until the mount is in /proc/mounts. Cleanup
// unmounts (lazily if busy) and makes sure the process is gone, also when the test failed.
func mountBucket(t testing.TB, srv *s3server.Server, bucket string, extra ...string) *mount {
	t.Helper()
	return mountBinary(t, binary, srv, bucket, extra...)
}

// mountBinary is mountBucket with another s3-fuse build (benchmarks compare builds).
func mountBinary(t testing.TB, binary string, srv *s3server.Server, bucket string, extra ...string) *mount {
	t.Helper()
	dir := t.TempDir()
	// Let other users reach the mount (tests of --uid, --allow-other); the test's temp root is 0700.
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, s3fuseArgs(srv, bucket, dir, extra...)...)
	cmd.Env = srv.Env()
	m := &mount{Dir: dir, fuseClient: startClient(t, cmd)}
	t.Cleanup(func() { m.stop(t) })
	// Ready = in the mount table and s3-fuse has said it serves (go-fuse has finished its own start-up
	// accesses to the mount, which would make an immediate umount EBUSY).
	m.waitMounted(t, dir, func() bool { return strings.Contains(m.output.String(), `"serving"`) })
	return m
}

// mountTimeout bounds how long a FUSE client may take to mount.
const mountTimeout = 30 * time.Second

// waitMounted waits until dir is in the mount table and ready() (nil: no further condition) holds, and
// fails the test, with the client's output, once the client has exited or mountTimeout has passed.
func (c *fuseClient) waitMounted(t testing.TB, dir string, ready func() bool) {
	t.Helper()
	rig.Eventually(t, c.whileRunning(t), mountTimeout, c.cmd.Path+" to mount "+dir, func(context.Context) (bool, error) {
		select {
		case <-c.done:
			return false, fmt.Errorf("exited before mounting: %s", c.output.String())
		default:
		}
		if !isMounted(dir) || ready != nil && !ready() {
			return false, fmt.Errorf("not mounted yet: %s", c.output.String())
		}
		return true, nil
	})
}

// whileRunning returns a context that ends when the client exits (or the test ends), so a wait for
// something the client should do stops as soon as it can no longer happen.
func (c *fuseClient) whileRunning(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		select {
		case <-c.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx
}

// stop unmounts and reaps the process: umount, then lazy umount, then SIGKILL.
func (m *mount) stop(t testing.TB) {
	if err := unmount(m.Dir); err != nil {
		t.Logf("umount %s: %v; detached lazily", m.Dir, err)
	}
	if m.reap(10 * time.Second) {
		t.Logf("s3-fuse still running 10s after unmount; killed it")
	}
	if t.Failed() {
		t.Logf("s3-fuse output:\n%s", m.output.String())
	}
}

// isMounted reports whether dir is a mount point in /proc/mounts.
func isMounted(dir string) bool {
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 1 && fields[1] == dir {
			return true
		}
	}
	return false
}

// newBucket creates a uniquely named bucket.
func newBucket(t testing.TB, srv *s3server.Server) string {
	t.Helper()
	name := fmt.Sprintf("b-%d", time.Now().UnixNano())
	if err := srv.CreateBucket(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return name
}

// errnoOf extracts the errno from an error of a file operation (0 for nil).
func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.Errno(^uintptr(0) >> 1)
}
