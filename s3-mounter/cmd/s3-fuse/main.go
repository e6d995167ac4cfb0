// Command s3-fuse mounts an S3 bucket with Mountpoint's semantics and accepts mount-s3's command line:
//
//	s3-fuse [options] <bucket> <mountpoint>
//
// Without --foreground it starts itself in the background and returns once the mount is ready, as
// mount-s3 does. <mountpoint> may be /dev/fd/N, a FUSE fd mounted by a privileged parent.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/s3-mounter/internal/mount"
	"github.com/stowage-csi/stowage/s3-mounter/internal/options"
	"github.com/stowage-csi/stowage/shared/signals"
	"github.com/stowage-csi/stowage/shared/version"
)

// readyFDEnv names the fd on which a background child reports "ok" or its error to the parent.
const readyFDEnv = "S3_FUSE_READY_FD"

func main() {
	os.Exit(realMain(os.Args[1:]))
}

func realMain(args []string) int {
	cfg, err := options.Parse(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "s3-fuse: %v\n", strings.TrimPrefix(err.Error(), "usage: "))
		return 2
	}
	if cfg.ShowHelp {
		fmt.Print(options.Usage)
		return 0
	}
	if cfg.ShowVersion {
		_ = version.Print(os.Stdout, "s3-fuse")
		return 0
	}
	// A background child (readyFDEnv set) was started by a parent that printed them already.
	for _, w := range cfg.Warnings {
		if os.Getenv(readyFDEnv) != "" {
			break
		}
		fmt.Fprintf(os.Stderr, "s3-fuse: warning: %s\n", w)
	}
	if cfg.CheckArgs {
		return 0
	}
	if !cfg.Foreground && !cfg.IsFDMount() && os.Getenv(readyFDEnv) == "" {
		return daemonize(args)
	}
	closeLog, err := setUpLogging(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "s3-fuse: %v\n", err)
		return 1
	}
	defer closeLog()
	ctx := klog.NewContext(context.Background(), klog.Background().WithValues("bucket", cfg.Bucket))
	// SIGTERM or SIGINT unmounts and exits 0; a second one exits at once (shared with the sidecars).
	ctx, stop := signals.Context(ctx, nil)
	defer stop()
	ready := readyReporter()
	if err := mount.Run(ctx, cfg, ready); err != nil {
		fmt.Fprintf(os.Stderr, "s3-fuse: %v\n", err)
		return 1
	}
	klog.Flush()
	return 0
}

// setUpLogging applies --debug, --no-log and --log-directory to klog. Logs go to stderr; with
// --log-directory to a new file in that directory instead (and to stderr too in the foreground, as
// mount-s3 also logs to stdout there); --no-log turns logging off. The returned function closes the file.
func setUpLogging(cfg *options.Config) (func(), error) {
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	if cfg.Debug {
		_ = klogFlags.Set("v", "4")
	}
	switch {
	case cfg.NoLog:
		_ = klogFlags.Set("logtostderr", "false")
		_ = klogFlags.Set("stderrthreshold", "FATAL")
		klog.SetOutput(io.Discard)
	case cfg.LogDirectory != "":
		f, err := openLogFile(cfg.LogDirectory)
		if err != nil {
			return nil, err
		}
		_ = klogFlags.Set("logtostderr", "false")
		_ = klogFlags.Set("stderrthreshold", "FATAL")
		var w io.Writer = f
		if cfg.Foreground {
			w = io.MultiWriter(f, os.Stderr)
		}
		klog.SetOutput(w)
		return func() { klog.Flush(); _ = f.Close() }, nil
	}
	return func() {}, nil
}

// openLogFile creates the directory if needed and a new file in it, named as mount-s3 names its log files
// (a timestamp and a random part, so mounts sharing the directory never share a file).
func openLogFile(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("--log-directory %s: %w", dir, err)
	}
	name := "mountpoint-s3-" + time.Now().UTC().Format("2006-01-02T15-04-05Z") + ".*.log"
	f, err := os.CreateTemp(dir, name)
	if err != nil {
		return nil, fmt.Errorf("--log-directory %s: %w", dir, err)
	}
	return f, nil
}

// readyReporter tells a waiting parent (see daemonize) whether the mount came up.
func readyReporter() func(error) {
	fdStr := os.Getenv(readyFDEnv)
	if fdStr == "" {
		return func(error) {}
	}
	var fd int
	if _, err := fmt.Sscanf(fdStr, "%d", &fd); err != nil {
		return func(error) {}
	}
	return func(err error) {
		f := os.NewFile(uintptr(fd), "ready")
		msg := "ok\n"
		if err != nil {
			msg = err.Error() + "\n"
		}
		_, _ = io.WriteString(f, msg)
		_ = f.Close()
	}
}

// daemonize re-runs s3-fuse in a new session and waits for it to report that it mounted.
func daemonize(args []string) int {
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "s3-fuse: %v\n", err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "s3-fuse: %v\n", err)
		return 1
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), readyFDEnv+"=3")
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "s3-fuse: %v\n", err)
		return 1
	}
	_ = w.Close()
	msg, err := io.ReadAll(r)
	if err != nil || len(msg) == 0 {
		werr := cmd.Wait()
		fmt.Fprintf(os.Stderr, "s3-fuse: background process ended before mounting: %v\n", errors.Join(err, werr))
		return 1
	}
	if s := strings.TrimSpace(string(msg)); s != "ok" {
		_ = cmd.Wait()
		fmt.Fprintf(os.Stderr, "s3-fuse: %s\n", s)
		return 1
	}
	_ = cmd.Process.Release()
	return 0
}
