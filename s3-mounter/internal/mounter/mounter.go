// Package mounter is the Mountpoint Pod's entry point (upstream's aws-s3-csi-mounter): it receives one mount
// request from the node plugin over the Pod's comm directory and runs Mountpoint on the FUSE fd it carries.
package mounter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/mountproto"
)

const (
	// MountpointBinary is the name Mountpoint's CLI has in the bin dir: AWS's mount-s3 or Stowage's s3-fuse.
	MountpointBinary = "mount-s3"
	// stderrTail is how much of Mountpoint's stderr is kept for mount.err: its fatal error is the last thing
	// it prints, and a crash loop must not grow the mounter's memory.
	stderrTail = 64 << 10
	// waitDelay bounds how long the output of a child that exited is still read, should a process it forked
	// keep its stderr open.
	waitDelay = 5 * time.Second
	// exitPoll is how often the mounter looks for mount.exit while it waits for the node's message.
	exitPoll = 200 * time.Millisecond
)

// Config is what the mounter needs; main fills it from the flags.
type Config struct {
	// CommDir is the directory shared with the node plugin (mount.sock, mount.err, mount.exit).
	CommDir string
	// BinDir holds the mount-s3 executable.
	BinDir string
	// RecvTimeout bounds the wait for the node's message.
	RecvTimeout time.Duration
	// Stdout and Stderr receive Mountpoint's output (the Pod's log).
	Stdout, Stderr io.Writer
}

// Run receives one mount request and runs Mountpoint on it until it exits, and returns the exit code of the
// mounter: 0 when the node asked the Pod to end (mount.exit), 1 otherwise, so that restartPolicy OnFailure
// restarts the container and it waits for a new request.
func Run(ctx context.Context, cfg Config) int {
	logger := klog.FromContext(ctx)
	sock := filepath.Join(cfg.CommDir, mountproto.SocketName)
	logger.Info("Waiting for mount options", "socket", sock, "timeout", cfg.RecvTimeout)
	recvCtx, cancel := context.WithTimeout(ctx, cfg.RecvTimeout)
	watched := watchExit(recvCtx, cfg.CommDir, cancel)
	opts, err := mountproto.Recv(recvCtx, sock)
	cancel()
	<-watched
	if err != nil {
		if mountproto.Exited(cfg.CommDir) {
			logger.Info("No mount options received and the node asked this Pod to exit", "reason", err)
			return 0
		}
		logger.Error(err, "Failed to receive mount options")
		return 1
	}
	fuse := os.NewFile(uintptr(opts.Fd), "fuse")
	// Only Mountpoint's fd 3 may hold the FUSE connection: a copy left in the mounter would keep it alive
	// after Mountpoint dies, and one leaked under another number could outlive an unmount.
	syscall.CloseOnExec(opts.Fd)

	// From here SIGTERM is ignored: during a node drain the kubelet stops this Pod alongside the workloads
	// that still use its mount, and Mountpoint must outlive them. The node ends the Pod with mount.exit and an
	// unmount; the Pod's grace (600 s) and then SIGKILL bound the rest. Notify rather than signal.Ignore,
	// so each signal is logged and Mountpoint itself starts with SIGTERM at its default.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	defer signal.Stop(sigs)

	status, stderr, err := runMountpoint(ctx, cfg, opts, fuse, sigs)
	if mountproto.Exited(cfg.CommDir) {
		logger.Info("Mountpoint exited and the node asked this Pod to exit", "status", status)
		return 0
	}
	if err == nil {
		err = fmt.Errorf("%s exited (%s) without the node asking it to (no %s)", MountpointBinary, status, mountproto.ExitName)
	}
	logger.Error(err, "Mountpoint failed")
	if werr := writeError(cfg.CommDir, stderr, err); werr != nil {
		logger.Error(werr, "Failed to write the error file for the node")
	}
	return 1
}

// runMountpoint runs `mount-s3 <bucket> /dev/fd/3 --foreground <args>` on fuse with only the received
// environment, and returns its exit status, the tail of its stderr, and an error if it could not run or
// did not exit 0. It closes fuse.
func runMountpoint(ctx context.Context, cfg Config, opts mountproto.Options, fuse *os.File, sigs <-chan os.Signal) (string, *tailBuffer, error) {
	logger := klog.FromContext(ctx)
	bin := filepath.Join(cfg.BinDir, MountpointBinary)
	args := append([]string{opts.BucketName, "/dev/fd/3", "--foreground"}, opts.Args...)
	tail := newTailBuffer(stderrTail)

	cmd := exec.CommandContext(ctx, bin, args...)
	// A nil Env would inherit the mounter's environment; Mountpoint gets exactly what the node sent.
	cmd.Env = append([]string{}, opts.Env...)
	cmd.ExtraFiles = []*os.File{fuse}
	cmd.Stdout = cfg.Stdout
	cmd.Stderr = io.MultiWriter(cfg.Stderr, tail)
	cmd.WaitDelay = waitDelay
	err := cmd.Start()
	// The child has its own copy (or none, if it did not start).
	_ = fuse.Close()
	if err != nil {
		return "not started", tail, fmt.Errorf("start %s: %w", bin, err)
	}
	// Args only: the environment carries credentials.
	logger.Info("Started Mountpoint", "pid", cmd.Process.Pid, "bucket", opts.BucketName, "args", opts.Args)

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			logger.Info("Ignoring signal: Mountpoint serves until the node unmounts it", "signal", sig.String())
		case err := <-done:
			var exitErr *exec.ExitError
			switch {
			case err == nil:
				return "exit status 0", tail, nil
			case errors.As(err, &exitErr):
				return exitErr.String(), tail, fmt.Errorf("%s %s", bin, exitErr)
			default:
				return err.Error(), tail, fmt.Errorf("wait for %s: %w", bin, err)
			}
		}
	}
}

// watchExit cancels the wait for the node's message once mount.exit appears: the node asks a Pod to end
// that never got a message (its workload failed validation) or whose Mountpoint failed and was restarted,
// and that Pod would otherwise wait out the whole receive timeout (upstream's 2 minutes) before exiting 0.
// The returned channel is closed when the watch has stopped (when ctx ends).
func watchExit(ctx context.Context, commDir string, cancel context.CancelFunc) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(exitPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if mountproto.Exited(commDir) {
					cancel()
					return
				}
			}
		}
	}()
	return done
}
