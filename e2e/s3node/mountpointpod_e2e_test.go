//go:build e2e

package s3node

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stowage-csi/stowage/shared/mountproto"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// mountpointPod plays a Mountpoint Pod's container (upstream's aws-s3-csi-mounter): receive the mount on
// comm/mount.sock, run `s3-fuse <bucket> /dev/fd/3 --foreground <args>` with the received env and fd,
// write its stderr to mount.err when it fails, and end once mount.exit exists. A failed run is followed by
// another receive, as the container's restart (restartPolicy OnFailure) does.
type mountpointPod struct {
	comm     string // the comm dir on the host
	received atomic.Int32
	done     chan struct{}
	mu       sync.Mutex
	log      bytes.Buffer
}

func startMountpointPod(ctx context.Context, comm string) *mountpointPod {
	p := &mountpointPod{comm: comm, done: make(chan struct{})}
	go p.run(ctx)
	return p
}

func (p *mountpointPod) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *mountpointPod) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.Write(b)
}

func (p *mountpointPod) run(ctx context.Context) {
	defer close(p.done)
	for ctx.Err() == nil && !mountproto.Exited(p.comm) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		opts, err := mountproto.Recv(rctx, filepath.Join(p.comm, mountproto.SocketName))
		cancel()
		if err != nil {
			continue // no mount asked yet; listen again (or end, on mount.exit)
		}
		p.received.Add(1)
		p.serve(ctx, opts)
	}
}

func (p *mountpointPod) serve(ctx context.Context, opts mountproto.Options) {
	fuse := os.NewFile(uintptr(opts.Fd), "fuse")
	args := append([]string{opts.BucketName, "/dev/fd/3", "--foreground"}, opts.Args...)
	cmd := exec.CommandContext(ctx, s3FuseBin, args...)
	cmd.Env = podView(opts.Env, p.comm)
	cmd.ExtraFiles = []*os.File{fuse}
	var stderr bytes.Buffer
	cmd.Stdout = p
	cmd.Stderr = io.MultiWriter(p, &stderr)
	// Unprivileged, as the Pod's container (runAsUser 1000, fsGroup 1000): it cannot mount anything itself
	// and must serve the fd it was given. (As root, s3-fuse's direct mount of "/dev/fd/3" would mount over
	// /dev/fuse instead.)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: &syscall.Credential{Uid: mountpointUID, Gid: mountpointUID}}
	p.Write([]byte("=== s3-fuse " + strings.Join(args, " ") + "\n"))
	err := cmd.Start()
	fuse.Close() // s3-fuse has its own copy, as the real mounter closes its after starting mount-s3
	if err == nil {
		err = cmd.Wait()
	}
	var exit *exec.ExitError
	if err != nil && !mountproto.Exited(p.comm) && (errors.As(err, &exit) || ctx.Err() == nil) {
		_ = os.WriteFile(filepath.Join(p.comm, mountproto.ErrorName), stderr.Bytes(), 0o600)
	}
}

// mountpointUID is the Mountpoint Pod's runAsUser and fsGroup (upstream's).
const mountpointUID = 1000

// podView rewrites the Pod's paths (/comm/...) in the environment to the comm dir on the host, where this
// stand-in for the Pod runs.
func podView(env []string, comm string) []string {
	out := make([]string, len(env))
	for i, kv := range env {
		out[i] = strings.ReplaceAll(kv, s3api.CommDir+"/", comm+"/")
	}
	return out
}
