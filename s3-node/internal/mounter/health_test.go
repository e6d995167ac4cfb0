package mounter

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	mountutils "k8s.io/mount-utils"

	"github.com/stowage-csi/stowage/s3-node/internal/testutil"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
)

const waitTimeout = 10 * time.Second

// hungSource is a Mounter whose Mountpoint Pod mp-1 has its source mounted. The first stat of that source
// hangs, as on a FUSE mount whose server does not answer, until unhang; then it answers statErr. Later stats
// answer at once: healthy.
type hungSource struct {
	m       *Mounter
	sys     *testutil.FakeSys
	source  string
	statted chan struct{} // receives once the first stat hangs
	release chan struct{}
	stats   atomic.Int32 // stats of the source started
}

func newHungSource(t *testing.T, statErr error) *hungSource {
	t.Helper()
	h := &hungSource{sys: testutil.NewFakeSys(), statted: make(chan struct{}, 1), release: make(chan struct{})}
	paths := Paths{Kubelet: t.TempDir()}
	// An hour: the health checks here end with their request, never with HealthTimeout.
	h.m = New(Config{Sys: h.sys, Paths: paths, HealthTimeout: time.Hour})
	h.source = paths.Source("mp-1")
	h.sys.AddMount(mountutils.MountInfo{MountPoint: h.source, Source: FUSESource, FsType: "fuse", Minor: 1})
	h.sys.OnStat = func(path string) error {
		if path != h.source || h.stats.Add(1) > 1 {
			return nil
		}
		h.statted <- struct{}{}
		<-h.release
		return statErr
	}
	// The hung stat's goroutine ends with the test.
	t.Cleanup(func() {
		select {
		case <-h.release:
		default:
			close(h.release)
		}
	})
	return h
}

func (h *hungSource) unhang() { close(h.release) }

// publish publishes mp-1's source at a new target in the background.
func (h *hungSource) publish(ctx context.Context, t *testing.T) <-chan error {
	done := make(chan error, 1)
	target := filepath.Join(t.TempDir(), "target")
	go func() {
		done <- h.m.Publish(ctx, Request{Target: target, MPPodName: "mp-1", MPPodUID: "mp-uid",
			Credentials: func(context.Context) ([]string, error) { return nil, nil }})
	}()
	return done
}

func (h *hungSource) calls(op string) int {
	n := 0
	for _, c := range h.sys.Calls() {
		if c.Op == op {
			n++
		}
	}
	return n
}

func wait[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// A publish whose request ends while the source's stat hangs must fail, and leave the source alone: the
// mount may be hung, so it is not shared, and it may be fine, so it is not replaced.
func TestPublishFailsWhenItsRequestEndsBeforeTheSourceAnswers(t *testing.T) {
	t.Run("cancelled while the stat hangs", func(t *testing.T) {
		h := newHungSource(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := h.publish(ctx, t)
		wait(t, h.statted, "the stat of the source")
		cancel()
		err := wait(t, done, "Publish to return")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Publish = %v, want the request's cancellation", err)
		}
		if n := h.calls("bind") + h.calls("unmount") + h.calls("mountfuse"); n != 0 {
			t.Fatalf("%d binds, unmounts or mounts (%v); the source's health is unknown", n, h.sys.Calls())
		}
	})
	t.Run("deadline passed", func(t *testing.T) {
		h := newHungSource(t, nil)
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
		defer cancel()
		err := wait(t, h.publish(ctx, t), "Publish to return")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Publish = %v, want the request's deadline", err)
		}
		if n := h.calls("bind") + h.calls("unmount") + h.calls("mountfuse"); n != 0 {
			t.Fatalf("%d binds, unmounts or mounts (%v); the source's health is unknown", n, h.sys.Calls())
		}
	})
}

// Retried publishes on a hung source must not each leave a stat behind: a later health check waits on the
// stat still running and takes its answer.
func TestAHungSourceIsNeverStattedTwiceAtOnce(t *testing.T) {
	h := newHungSource(t, syscall.ENOTCONN)
	// A workload still uses the source, so a broken one is reported rather than replaced.
	if err := h.sys.Bind(h.source, filepath.Join(t.TempDir(), "in-use"), false); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	first := h.publish(ctx, t)
	wait(t, h.statted, "the stat of the source")
	cancel()
	if err := wait(t, first, "the first Publish to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("first Publish = %v, want the request's cancellation", err)
	}

	// The kubelet retries while the stat still hangs.
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2), ktesting.BufferLogs(true)))
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer()
	second := h.publish(klog.NewContext(context.Background(), logger), t)
	sharedtestutil.Eventually(t, waitTimeout, "the retry to wait on the running stat", func() (bool, error) {
		return strings.Contains(logs.String(), "A stat of the source mount is still running; waiting on it"), nil
	})
	h.unhang()
	err := wait(t, second, "the retried Publish to return")
	if !errors.Is(err, syscall.ENOTCONN) || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("retried Publish = %v, want the running stat's answer: broken (ENOTCONN)", err)
	}
	if n := h.stats.Load(); n != 1 {
		t.Fatalf("%d stats of the source, want 1", n)
	}

	// Once answered, the next check stats afresh (and this time the source answers).
	if err := wait(t, h.publish(context.Background(), t), "a third Publish"); err != nil || h.stats.Load() != 2 {
		t.Fatalf("third Publish = %v after %d stats, want success after a fresh stat (2)", err, h.stats.Load())
	}
}
