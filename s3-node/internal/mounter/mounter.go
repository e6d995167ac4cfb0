package mounter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	"k8s.io/utils/keymutex"

	"github.com/stowage-csi/stowage/shared/mountproto"
)

// Config builds a Mounter.
type Config struct {
	Sys   Syscalls
	Paths Paths
	// Send delivers the mount message; mountproto.Send when nil.
	Send func(ctx context.Context, socket string, opts mountproto.Options) error
	// Poll is how often the mount's outcome is checked; 200 ms when zero.
	Poll time.Duration
	// HealthTimeout bounds the check of an existing source; 5 s when zero.
	HealthTimeout time.Duration
}

// Mounter mounts and shares sources; calls for one Mountpoint Pod are serialised by its lock, which the
// unmounter takes too.
type Mounter struct {
	cfg   Config
	locks keymutex.KeyMutex
	// stats are the stats of source mounts still running, by source; see stat.
	stats stats
}

// New returns a Mounter.
func New(cfg Config) *Mounter {
	if cfg.Send == nil {
		cfg.Send = mountproto.Send
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 200 * time.Millisecond
	}
	if cfg.HealthTimeout <= 0 {
		cfg.HealthTimeout = 5 * time.Second
	}
	return &Mounter{cfg: cfg, locks: keymutex.NewHashed(0), stats: stats{running: map[string]*statCall{}}}
}

// Sys returns the syscalls the Mounter uses.
func (m *Mounter) Sys() Syscalls { return m.cfg.Sys }

// Paths returns the kubelet paths.
func (m *Mounter) Paths() Paths { return m.cfg.Paths }

// Lock takes the lock of a Mountpoint Pod; the returned func releases it.
func (m *Mounter) Lock(mpPodName string) func() {
	m.locks.LockKey(mpPodName)
	return func() { _ = m.locks.UnlockKey(mpPodName) }
}

// Request is one publish on a Mountpoint Pod.
type Request struct {
	Target     string
	MPPodName  string
	MPPodUID   string
	Bucket     string
	Args       []string
	ReadOnly   bool
	AllowOther bool
	// Credentials writes the credential files and returns Mountpoint's whole environment; it runs under
	// the Pod's lock, so it never races the unmounter's removal of the files.
	Credentials func(context.Context) ([]string, error)
}

// ErrPodEnding is wrapped by a publish through a Mountpoint Pod the node has asked to exit (mount.exit): its
// last workload went, so the controller assigns a new workload a new Pod. Sending this one a mount would be
// answered by a mounter that exits 0 on mount.exit without serving or reporting anything, and the publish
// would wait for its whole deadline.
var ErrPodEnding = errors.New("the Mountpoint Pod is ending")

// Publish mounts the Mountpoint Pod's source if it is not mounted yet and binds it at the target.
func (m *Mounter) Publish(ctx context.Context, r Request) error {
	defer m.Lock(r.MPPodName)()
	// Under the lock: the unmounter writes mount.exit under it too, so a publish either comes before the
	// teardown (and its bind keeps the source) or sees the file.
	if mountproto.Exited(m.cfg.Paths.CommDir(r.MPPodUID)) {
		return fmt.Errorf("%w: the node asked Mountpoint Pod %s to exit once no workload used it (%s); the controller gives the workload a new one", ErrPodEnding, r.MPPodName, mountproto.ExitName)
	}
	env, err := r.Credentials(ctx)
	if err != nil {
		return err
	}
	source := m.cfg.Paths.Source(r.MPPodName)
	if err := m.ensureSource(ctx, r, source, env); err != nil {
		return err
	}
	if err := os.MkdirAll(r.Target, 0o750); err != nil {
		return fmt.Errorf("create target %s: %w", r.Target, err)
	}
	// A retried publish may find the bind of the first attempt already made.
	if ok, err := IsS3Mount(m.cfg.Sys, r.Target); err != nil || ok {
		return err
	}
	return m.cfg.Sys.Bind(source, r.Target, r.ReadOnly)
}

// Refresh rewrites the credentials of an already published target (kubelet's periodic republish).
func (m *Mounter) Refresh(ctx context.Context, mpPodName string, credentials func(context.Context) ([]string, error)) error {
	defer m.Lock(mpPodName)()
	_, err := credentials(ctx)
	return err
}

// ensureSource leaves a served source mount: an existing healthy one is shared, one whose Mountpoint has
// gone (its Pod restarted) is replaced when no workload uses it any more.
func (m *Mounter) ensureSource(ctx context.Context, r Request, source string, env []string) error {
	mounted, err := IsS3Mount(m.cfg.Sys, source)
	if err != nil {
		return err
	}
	if mounted {
		var unknown *unknownHealthError
		if err := m.health(ctx, source); err == nil {
			return nil
		} else if errors.As(err, &unknown) {
			return err
		} else if binds, _ := BindMounts(m.cfg.Sys, source); len(binds) > 0 {
			return fmt.Errorf("the source mount %s of Mountpoint Pod %s is broken (%w) and still used by %d workload mounts", source, r.MPPodName, err, len(binds))
		}
		klog.FromContext(ctx).Info("Replacing a broken source mount", "source", source, "mountpointPod", r.MPPodName)
		m.unmount(source)
	}
	return m.mountSource(ctx, r, source, env)
}

// health stats the source within HealthTimeout; a Mountpoint that is alive but slow counts as healthy.
// When ctx ends first, the source's health is unknown, which is an error wrapping ctx's cause: the caller
// must neither share the mount (it may be hung) nor replace it (it may be fine), only fail and be retried.
func (m *Mounter) health(ctx context.Context, source string) error {
	call := m.stat(ctx, source)
	timeout := time.NewTimer(m.cfg.HealthTimeout)
	defer timeout.Stop()
	select {
	case <-call.done:
		return call.err
	case <-timeout.C:
		return nil
	case <-ctx.Done():
		return &unknownHealthError{source: source, cause: context.Cause(ctx)}
	}
}

// unknownHealthError is a health check that ended before the source's stat answered.
type unknownHealthError struct {
	source string
	cause  error
}

func (e *unknownHealthError) Error() string {
	return fmt.Sprintf("health of the source mount %s unknown: its stat had not answered when the request ended: %v", e.source, e.cause)
}

func (e *unknownHealthError) Unwrap() error { return e.cause }

func (m *Mounter) mountSource(ctx context.Context, r Request, source string, env []string) (err error) {
	if err := os.MkdirAll(source, 0o750); err != nil {
		return fmt.Errorf("create source %s: %w", source, err)
	}
	fd, err := m.cfg.Sys.OpenFUSE()
	if err != nil {
		return err
	}
	// The Mountpoint Pod holds its own copy once the message is sent: the node's is never needed again.
	defer m.cfg.Sys.CloseFd(fd)
	if err := m.cfg.Sys.MountFUSE(source, fd, r.ReadOnly, r.AllowOther); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			m.unmount(source)
		}
	}()
	comm := m.cfg.Paths.CommDir(r.MPPodUID)
	errFile := filepath.Join(comm, mountproto.ErrorName)
	if err := os.Remove(errFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the previous %s: %w", errFile, err)
	}
	opts := mountproto.Options{Fd: fd, BucketName: r.Bucket, Args: r.Args, Env: env}
	if err := m.cfg.Send(ctx, filepath.Join(comm, mountproto.SocketName), opts); err != nil {
		return fmt.Errorf("send the mount to Mountpoint Pod %s: %w", r.MPPodName, err)
	}
	return m.waitServed(ctx, r.MPPodName, source, errFile)
}

// waitServed waits until Mountpoint answers on the source, or reports why it failed. A stat of a FUSE
// mount blocks until its server has taken the connection over, so it runs beside the checks of mount.err.
func (m *Mounter) waitServed(ctx context.Context, mpPod, source, errFile string) error {
	tick := time.NewTicker(m.cfg.Poll)
	defer tick.Stop()
	var probe *statCall // the stat running, if any
	due := true
	for {
		if b, err := os.ReadFile(errFile); err == nil {
			return fmt.Errorf("the Mountpoint in Pod %s failed: %s", mpPod, strings.TrimSpace(string(b)))
		}
		if probe == nil && due {
			probe, due = m.stat(ctx, source), false
		}
		var answered <-chan struct{} // nil, so never ready, while no stat runs
		if probe != nil {
			answered = probe.done
		}
		select {
		case <-answered:
			err := probe.err
			probe = nil
			if err == nil {
				if ok, terr := IsS3Mount(m.cfg.Sys, source); terr == nil && ok {
					return nil
				}
			}
		case <-tick.C:
			due = true
		case <-ctx.Done():
			return fmt.Errorf("waiting for Mountpoint in Pod %s to serve %s: %w", mpPod, source, context.Cause(ctx))
		}
	}
}

// unmount unmounts path, lazily when a plain unmount fails (a dead server, a busy mount).
func (m *Mounter) unmount(path string) {
	defer m.forgetStat(path)
	if err := m.cfg.Sys.Unmount(path, 0); err != nil && !IsNotMounted(err) {
		_ = m.cfg.Sys.Unmount(path, unix.MNT_DETACH)
	}
}

// Unmount unmounts path if it is mounted and reports errors other than "not mounted".
func (m *Mounter) Unmount(path string) error {
	if err := m.cfg.Sys.Unmount(path, 0); err != nil && !IsNotMounted(err) {
		if err2 := m.cfg.Sys.Unmount(path, unix.MNT_DETACH); err2 != nil && !IsNotMounted(err2) {
			return err
		}
	}
	m.forgetStat(path)
	return nil
}
