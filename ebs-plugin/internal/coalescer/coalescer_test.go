package coalescer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stowage-csi/stowage/shared/testutil"
)

const (
	window  = time.Second
	timeout = time.Minute // how long a test waits for a positive signal
)

type req struct{ size, iops int }

var errConflict = errors.New("conflict")

func mergeReq(a, b req) (req, error) {
	if b.size != 0 {
		if a.size != 0 && a.size != b.size {
			return a, errConflict
		}
		a.size = b.size
	}
	if b.iops != 0 {
		if a.iops != 0 && a.iops != b.iops {
			return a, errConflict
		}
		a.iops = b.iops
	}
	return a, nil
}

type answer struct {
	out int
	err error
}

func submitAsync(ctx context.Context, c *Coalescer[string, req, int], key string, in req) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		out, err := c.Submit(ctx, key, in)
		ch <- answer{out, err}
	}()
	return ch
}

// waitJoined returns once n callers wait on key's window.
func waitJoined(t *testing.T, c *Coalescer[string, req, int], key string, n int) {
	t.Helper()
	testutil.Eventually(t, timeout, fmt.Sprintf("%d callers in the window of %s", n, key), func() (bool, error) {
		if w := c.Waiting(key); w != n {
			return false, fmt.Errorf("%d waiting", w)
		}
		return true, nil
	})
}

func TestCoalescerMergesWithinWindowAndRejectsConflictsForThatCallerOnly(t *testing.T) {
	var calls atomic.Int32
	merged := make(chan req, 2)
	clk := clocktesting.NewFakeClock(time.Now())
	c := New(Config{Window: window, Timeout: time.Second, Clock: clk}, mergeReq, func(_ context.Context, key string, in req) (int, error) {
		calls.Add(1)
		merged <- in
		return in.size, nil
	})
	first := submitAsync(context.Background(), c, "vol-1", req{size: 10})
	waitJoined(t, c, "vol-1", 1)
	second := submitAsync(context.Background(), c, "vol-1", req{iops: 3000})
	waitJoined(t, c, "vol-1", 2)
	// A conflicting input fails at once, without joining or closing the window.
	if _, err := c.Submit(context.Background(), "vol-1", req{size: 20}); !errors.Is(err, errConflict) {
		t.Fatalf("conflicting caller: err = %v, want the merge error", err)
	}
	if n := c.Waiting("vol-1"); n != 2 || calls.Load() != 0 {
		t.Fatalf("after the conflict: %d waiting, %d executions; want 2 and 0", n, calls.Load())
	}
	clk.Step(window)
	for i, ch := range []<-chan answer{first, second} {
		if a := <-ch; a.err != nil || a.out != 10 {
			t.Errorf("caller %d got %d, %v; want 10", i, a.out, a.err)
		}
	}
	if got := <-merged; calls.Load() != 1 || got != (req{size: 10, iops: 3000}) {
		t.Fatalf("calls = %d, merged = %+v", calls.Load(), got)
	}

	// A new window starts after execution.
	third := submitAsync(context.Background(), c, "vol-1", req{size: 30})
	waitJoined(t, c, "vol-1", 1)
	clk.Step(window)
	if a := <-third; a.err != nil || a.out != 30 || calls.Load() != 2 {
		t.Fatalf("second window: %d, %v, calls %d", a.out, a.err, calls.Load())
	}
}

func TestCoalescerKeysHaveSeparateWindows(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	c := New(Config{Window: window, Timeout: time.Second, Clock: clk}, mergeReq, func(_ context.Context, key string, in req) (int, error) {
		return in.size, nil
	})
	a := submitAsync(context.Background(), c, "vol-a", req{size: 1})
	b := submitAsync(context.Background(), c, "vol-b", req{size: 2}) // no conflict: another volume
	waitJoined(t, c, "vol-a", 1)
	waitJoined(t, c, "vol-b", 1)
	clk.Step(window)
	if r := <-a; r.err != nil || r.out != 1 {
		t.Errorf("vol-a: %d, %v", r.out, r.err)
	}
	if r := <-b; r.err != nil || r.out != 2 {
		t.Errorf("vol-b: %d, %v", r.out, r.err)
	}
}

type ctxKey struct{}

// The execution runs with the first caller's values (its logger) but is not cancelled when that caller gives
// up: the callers still waiting get the result.
func TestCoalescerKeepsFirstCallersValuesNotItsCancellation(t *testing.T) {
	type seen struct {
		err   error
		value any
	}
	execSaw := make(chan seen, 1)
	clk := clocktesting.NewFakeClock(time.Now())
	c := New(Config{Window: window, Timeout: time.Minute, Clock: clk}, mergeReq, func(ctx context.Context, _ string, in req) (int, error) {
		execSaw <- seen{ctx.Err(), ctx.Value(ctxKey{})}
		return in.size, nil
	})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "first caller"))
	first := submitAsync(ctx, c, "vol-1", req{size: 5})
	waitJoined(t, c, "vol-1", 1)
	second := submitAsync(context.Background(), c, "vol-1", req{iops: 100})
	waitJoined(t, c, "vol-1", 2)
	cancel()
	if a := <-first; !errors.Is(a.err, context.Canceled) {
		t.Fatalf("cancelled caller: %v, want context.Canceled", a.err)
	}
	clk.Step(window)
	if a := <-second; a.err != nil || a.out != 5 {
		t.Fatalf("other caller: %d, %v", a.out, a.err)
	}
	saw := <-execSaw
	if saw.err != nil {
		t.Errorf("execution context ended: %v", saw.err)
	}
	if saw.value != "first caller" {
		t.Errorf("execution context value = %v, want the first caller's", saw.value)
	}
}
