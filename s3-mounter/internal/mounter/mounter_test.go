package mounter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/mountproto"
)

// The test binary is also the fake mount-s3: a symlink named mount-s3 in a temp bin dir points at it.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == MountpointBinary {
		os.Exit(fakeMountpoint())
	}
	// os/signal's loop stays once Notify has been called; everything the mounter starts must be gone.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("os/signal.signal_recv"), goleak.IgnoreTopFunction("os/signal.loop"))
}

// report is what the fake Mountpoint saw, written to $FAKE_REPORT.
type report struct {
	Args []string
	Env  []string
	FD3  string // readlink of /proc/self/fd/3
}

// fakeMountpoint records its argv, environment and fd 3, then reads one instruction line from fd 3 (the
// "FUSE fd" is a pipe the test writes to): "exit <code> <stderr text>".
func fakeMountpoint() int {
	fd3, _ := os.Readlink("/proc/self/fd/3")
	rep, _ := json.Marshal(report{Args: os.Args[1:], Env: os.Environ(), FD3: fd3})
	if path := os.Getenv("FAKE_REPORT"); path != "" {
		_ = os.WriteFile(path+".tmp", rep, 0o644)
		_ = os.Rename(path+".tmp", path)
	}
	line, err := bufio.NewReader(os.NewFile(3, "fd3")).ReadString('\n')
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake mount-s3: read fd 3: %v\n", err)
		return 3
	}
	f := strings.SplitN(strings.TrimSpace(line), " ", 3)
	code, _ := strconv.Atoi(f[1])
	if len(f) == 3 {
		fmt.Fprintln(os.Stderr, f[2])
	}
	fmt.Println("fake mount-s3 stdout")
	return code
}

// logSink collects the mounter's log messages.
type logSink struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logSink) has(substr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.msgs, func(m string) bool { return strings.Contains(m, substr) })
}

// fixture is one mounter under test with its comm and bin dirs.
type fixture struct {
	comm, bin string
	logs      *logSink
	stderr    bytes.Buffer
	code      chan int
}

func newFixture(t *testing.T, withBinary bool) *fixture {
	t.Helper()
	r := &fixture{comm: t.TempDir(), bin: t.TempDir(), logs: &logSink{}, code: make(chan int, 1)}
	if withBinary {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(self, filepath.Join(r.bin, MountpointBinary)); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *fixture) start(t *testing.T, timeout time.Duration) {
	t.Helper()
	logger := funcr.New(func(prefix, args string) {
		r.logs.mu.Lock()
		defer r.logs.mu.Unlock()
		r.logs.msgs = append(r.logs.msgs, args)
	}, funcr.Options{Verbosity: 10})
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	cfg := Config{CommDir: r.comm, BinDir: r.bin, RecvTimeout: timeout, Stdout: io.Discard, Stderr: &lockedWriter{w: &r.stderr}}
	go func() { r.code <- Run(ctx, cfg) }()
	// Run kills its child when ctx ends: a failed test leaves no fake Mountpoint behind.
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.code:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
}

func (r *fixture) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-r.code:
		r.code <- code // for Cleanup
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("the mounter did not exit within 30s")
		return -1
	}
}

// send sends a request whose "FUSE fd" is the read end of a pipe and returns the write end, after closing
// the test's copy of the read end as the node plugin does.
func (r *fixture) send(t *testing.T, opts mountproto.Options) (*os.File, string) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pw.Close() })
	link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", pr.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	opts.Fd = int(pr.Fd())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mountproto.Send(ctx, filepath.Join(r.comm, mountproto.SocketName), opts); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	return pw, link
}

func (r *fixture) exitMarker(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(r.comm, mountproto.ExitName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestMountExitEndsTheWaitForAMessage(t *testing.T) {
	r := newFixture(t, true)
	r.start(t, time.Hour)
	// Once the mounter listens, the node gives up on this Pod without sending anything.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(r.comm, mountproto.SocketName)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the mounter never listened on mount.sock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.exitMarker(t)
	if got := r.wait(t); got != 0 {
		t.Errorf("exit code = %d, want 0", got)
	}
}

func TestReceiveTimeout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		exitFile bool
		want     int
	}{
		{"without mount.exit the container fails", false, 1},
		{"with mount.exit the Pod is done", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFixture(t, true)
			if tc.exitFile {
				r.exitMarker(t)
			}
			r.start(t, 200*time.Millisecond)
			if got := r.wait(t); got != tc.want {
				t.Errorf("exit code = %d, want %d", got, tc.want)
			}
			if !r.logs.has("receive mount options") {
				t.Errorf("logs do not give the reason: %q", r.logs.msgs)
			}
			if _, err := os.Stat(filepath.Join(r.comm, mountproto.ErrorName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("mount.err after a receive timeout: %v", err)
			}
		})
	}
}

func TestMountpointExit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		binary      bool
		exitFile    bool
		instruction string
		want        int
		wantErrFile []string // substrings of mount.err; nil: no mount.err
	}{
		{name: "exit 0 after mount.exit", binary: true, exitFile: true, instruction: "exit 0", want: 0},
		{name: "exit 1 after mount.exit", binary: true, exitFile: true, instruction: "exit 1 late failure", want: 0},
		{name: "exit 1 without mount.exit", binary: true, instruction: "exit 1 bucket does-not-exist not found",
			want: 1, wantErrFile: []string{"bucket does-not-exist not found\n", "exit status 1"}},
		{name: "exit 0 without mount.exit", binary: true, instruction: "exit 0",
			want: 1, wantErrFile: []string{"exit status 0", "no mount.exit"}},
		{name: "missing binary", binary: false,
			want: 1, wantErrFile: []string{MountpointBinary + ": no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFixture(t, tc.binary)
			if tc.exitFile {
				r.exitMarker(t)
			}
			r.start(t, 10*time.Second)
			pw, _ := r.send(t, mountproto.Options{BucketName: "b", Env: []string{"FAKE_MODE=x"}})
			if tc.instruction != "" {
				if _, err := pw.WriteString(tc.instruction + "\n"); err != nil {
					t.Fatal(err)
				}
			}
			if got := r.wait(t); got != tc.want {
				t.Errorf("exit code = %d, want %d; logs %q", got, tc.want, r.logs.msgs)
			}
			errFile := filepath.Join(r.comm, mountproto.ErrorName)
			fi, err := os.Stat(errFile)
			if tc.wantErrFile == nil {
				if !errors.Is(err, os.ErrNotExist) {
					t.Errorf("stat mount.err = %v, want none", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("mount.err: %v", err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("mount.err mode = %v, want 0600", fi.Mode().Perm())
			}
			b, _ := os.ReadFile(errFile)
			for _, want := range tc.wantErrFile {
				if !strings.Contains(string(b), want) {
					t.Errorf("mount.err = %q, want it to contain %q", b, want)
				}
			}
			// The mounter closed its copy of the fd: with the child gone, no reader is left.
			if _, err := pw.WriteString("x"); !errors.Is(err, syscall.EPIPE) {
				t.Errorf("write to the fd after the mounter exited = %v, want EPIPE (the mounter kept the fd open)", err)
			}
		})
	}
}

// TestMountpointSeesOnlyTheRequest checks the command line, that the environment is the received one only,
// that fd 3 is the received file, and that the child's stderr reaches the Pod log.
func TestMountpointSeesOnlyTheRequest(t *testing.T) {
	t.Setenv("MOUNTER_SECRET", "must-not-leak")
	r := newFixture(t, true)
	reportPath := filepath.Join(t.TempDir(), "report.json")
	env := []string{"AWS_ACCESS_KEY_ID=ak", "AWS_REGION=eu-west-1", "FAKE_REPORT=" + reportPath}
	r.exitMarker(t)
	r.start(t, 10*time.Second)
	pw, fdLink := r.send(t, mountproto.Options{BucketName: "my-bucket", Args: []string{"--allow-delete", "--region=eu-west-1"}, Env: env})
	if _, err := pw.WriteString("exit 0 hello on stderr\n"); err != nil {
		t.Fatal(err)
	}
	if got := r.wait(t); got != 0 {
		t.Fatalf("exit code = %d, want 0; logs %q", got, r.logs.msgs)
	}
	b, err := os.ReadFile(reportPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	wantArgs := []string{"my-bucket", "/dev/fd/3", "--foreground", "--allow-delete", "--region=eu-west-1"}
	if !slices.Equal(rep.Args, wantArgs) {
		t.Errorf("args = %q, want %q", rep.Args, wantArgs)
	}
	if !slices.Equal(rep.Env, env) {
		t.Errorf("env = %q, want exactly %q", rep.Env, env)
	}
	if rep.FD3 != fdLink {
		t.Errorf("fd 3 = %q, want the received %q", rep.FD3, fdLink)
	}
	if !strings.Contains(r.stderr.String(), "hello on stderr") {
		t.Errorf("child stderr not in the mounter's stderr: %q", r.stderr.String())
	}
}

// TestSIGTERMIgnoredWhileMountpointRuns sends SIGTERM to this process (the mounter) while the fake
// Mountpoint runs: the mounter logs it, and the child keeps running and later exits on its own terms.
func TestSIGTERMIgnoredWhileMountpointRuns(t *testing.T) {
	r := newFixture(t, true)
	reportPath := filepath.Join(t.TempDir(), "report.json")
	r.start(t, 10*time.Second)
	pw, _ := r.send(t, mountproto.Options{BucketName: "b", Env: []string{"FAKE_REPORT=" + reportPath}})
	// The child has started, so the mounter is past signal.Notify: SIGTERM reaches its channel.
	waitFor(t, "the fake Mountpoint to start", func() bool { _, err := os.Stat(reportPath); return err == nil })
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mounter to log the ignored SIGTERM", func() bool { return r.logs.has("Ignoring signal") })
	select {
	case code := <-r.code:
		t.Fatalf("the mounter exited (%d) after SIGTERM", code)
	default:
	}
	// The child still reads its fd: it is alive and ends only when told.
	r.exitMarker(t)
	if _, err := pw.WriteString("exit 0\n"); err != nil {
		t.Fatal(err)
	}
	if got := r.wait(t); got != 0 {
		t.Errorf("exit code = %d, want 0; logs %q", got, r.logs.msgs)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: timed out", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"fits", []string{"ab", "cd"}, "abcd"},
		{"drops the oldest", []string{"abc", "def"}, "[earlier output dropped]\ncdef"},
		{"one large write", []string{"abcdefgh"}, "[earlier output dropped]\nefgh"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTailBuffer(4)
			for _, w := range tc.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if got := string(b.Bytes()); got != tc.want {
				t.Errorf("Bytes() = %q, want %q", got, tc.want)
			}
		})
	}
}
