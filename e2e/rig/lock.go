package rig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// LockFile takes an exclusive flock on path, creating the file if needed. It waits while another process
// holds the lock, logging once that it waits, until ctx ends. Calling unlock releases it; the kernel also
// releases it when this process dies, so a killed test never leaves a stale lock.
func LockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	for waited := false; ; waited = true {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !waited {
			klog.FromContext(ctx).Info("Waiting for another process holding the lock", "lock", path)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
