// Package unmounter tears down the source mount of a Mountpoint Pod the controller marked
// s3.csi.aws.com/needs-unmount=true, once no workload's bind mount uses it, and ends the Pod through
// mount.exit, which makes mount-s3 and then the Pod exit, as upstream's node does. It also removes source
// mounts whose Mountpoint Pod is gone.
package unmounter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/s3-node/internal/credentials"
	"github.com/stowage-csi/stowage/s3-node/internal/mounter"
	"github.com/stowage-csi/stowage/shared/mountproto"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// Upstream's timings: a sweep every 2 minutes catches what an update event missed; a source still used
// by workloads is waited for 30 s (kubelet unpublishes them meanwhile), then retried on the next sweep.
const (
	DefaultInterval = 2 * time.Minute
	DefaultBindPoll = 5 * time.Second
	DefaultBindWait = 30 * time.Second
)

// Config builds an Unmounter.
type Config struct {
	Mounter *mounter.Mounter
	// Pods lists this node's Mountpoint Pods (the informer's cache, synced before Run).
	Pods corelisters.PodNamespaceLister
	// Interval, BindPoll and BindWait default to upstream's.
	Interval, BindPoll, BindWait time.Duration
}

// Unmounter runs the teardowns.
type Unmounter struct {
	cfg     Config
	trigger chan struct{}
	mu      sync.Mutex
	running map[string]bool // Pod names with a teardown in progress
	wg      sync.WaitGroup
}

// New returns an Unmounter.
func New(cfg Config) *Unmounter {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.BindPoll <= 0 {
		cfg.BindPoll = DefaultBindPoll
	}
	if cfg.BindWait <= 0 {
		cfg.BindWait = DefaultBindWait
	}
	return &Unmounter{cfg: cfg, trigger: make(chan struct{}, 1), running: map[string]bool{}}
}

// OnPodUpdate is the informer's update handler: a Pod newly marked needs-unmount starts a sweep at once.
func (u *Unmounter) OnPodUpdate(_, obj any) {
	if pod, ok := obj.(*corev1.Pod); ok && NeedsUnmount(pod) {
		select {
		case u.trigger <- struct{}{}:
		default:
		}
	}
}

// NeedsUnmount reports the controller's mark.
func NeedsUnmount(pod *corev1.Pod) bool {
	return pod.Annotations[s3api.AnnotationNeedsUnmount] == "true"
}

// Run sweeps on every trigger and every Interval until ctx ends, then waits for teardowns in progress.
func (u *Unmounter) Run(ctx context.Context) {
	defer u.wg.Wait()
	t := time.NewTicker(u.cfg.Interval)
	defer t.Stop()
	for {
		u.Sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-u.trigger:
		}
	}
}

// Sweep starts a teardown for each marked Pod and each dangling source, each in its own goroutine so a
// source still in use does not hold up the others.
func (u *Unmounter) Sweep(ctx context.Context) {
	logger := klog.FromContext(ctx)
	pods, err := u.cfg.Pods.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing Mountpoint Pods")
		return
	}
	known := map[string]bool{}
	for _, pod := range pods {
		known[pod.Name] = true
		if NeedsUnmount(pod) {
			pod := pod
			u.start(ctx, pod.Name, func(ctx context.Context) error { return u.Teardown(ctx, pod) })
		}
	}
	entries, err := os.ReadDir(u.cfg.Mounter.Paths().SourceDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		logger.Error(err, "Listing source mounts")
	}
	for _, e := range entries {
		if name := e.Name(); !known[name] {
			u.start(ctx, name, func(ctx context.Context) error { return u.removeDangling(ctx, name) })
		}
	}
}

func (u *Unmounter) start(ctx context.Context, name string, do func(context.Context) error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.running[name] {
		return
	}
	u.running[name] = true
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		defer func() {
			u.mu.Lock()
			delete(u.running, name)
			u.mu.Unlock()
		}()
		if err := do(ctx); err != nil {
			klog.FromContext(ctx).Info("Source teardown not finished; retrying on the next sweep", "mountpointPod", name, "err", err.Error())
		}
	}()
}

// Teardown ends a marked Mountpoint Pod: mount.exit, wait for its binds to go, unmount and remove the
// source, delete its credentials. Every step is idempotent, so a later sweep repeats it harmlessly.
func (u *Unmounter) Teardown(ctx context.Context, pod *corev1.Pod) error {
	m := u.cfg.Mounter
	defer m.Lock(pod.Name)()
	comm := m.Paths().CommDir(string(pod.UID))
	if _, err := os.Stat(comm); err == nil {
		// The mounter exits 0 when Mountpoint ends and this file exists, so the Pod Succeeds.
		if err := os.WriteFile(filepath.Join(comm, mountproto.ExitName), nil, 0o644); err != nil {
			return fmt.Errorf("create %s: %w", mountproto.ExitName, err)
		}
	}
	// The credentials go once no workload uses the source and before the source is unmounted: that unmount
	// ends Mountpoint, and with it the Pod, whose comm tmpfs the kubelet then tears down; removed after it,
	// they would be removed by the kubelet or not at all (a kubelet slow to tear down the Pod keeps them).
	if err := u.waitUnbound(ctx, m.Paths().Source(pod.Name)); err != nil {
		return err
	}
	if err := credentials.Remove(comm); err != nil {
		return err
	}
	if err := u.unmountSource(ctx, pod.Name); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Mountpoint Pod's source unmounted", "mountpointPod", klog.KObj(pod))
	return nil
}

func (u *Unmounter) removeDangling(ctx context.Context, name string) error {
	defer u.cfg.Mounter.Lock(name)()
	if _, err := u.cfg.Pods.Get(name); err == nil {
		return nil // created since the sweep listed them
	}
	klog.FromContext(ctx).Info("Removing a source mount without a Mountpoint Pod", "source", u.cfg.Mounter.Paths().Source(name))
	return u.unmountSource(ctx, name)
}

// unmountSource waits until no bind of the source is left, then unmounts and removes it.
func (u *Unmounter) unmountSource(ctx context.Context, name string) error {
	m := u.cfg.Mounter
	source := m.Paths().Source(name)
	if err := u.waitUnbound(ctx, source); err != nil {
		return err
	}
	if mounted, err := mounter.IsMountPoint(m.Sys(), source); err != nil {
		return err
	} else if mounted {
		if err := m.Unmount(source); err != nil {
			return err
		}
	}
	if err := os.Remove(source); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove source directory: %w", err)
	}
	return nil
}

// waitUnbound waits (BindWait at most) until no workload's bind of the source is left.
func (u *Unmounter) waitUnbound(ctx context.Context, source string) error {
	m := u.cfg.Mounter
	deadline := time.Now().Add(u.cfg.BindWait)
	for {
		binds, err := mounter.BindMounts(m.Sys(), source)
		if err != nil {
			return err
		}
		if len(binds) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("source %s is still bound at %v", source, binds)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(u.cfg.BindPoll):
		}
	}
	return nil
}
