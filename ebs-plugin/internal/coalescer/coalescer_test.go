package coalescer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

func TestCoalescerMergesWithinWindowAndRejectsConflictsForThatCallerOnly(t *testing.T) {
	var calls atomic.Int32
	var got req
	c := New(50*time.Millisecond, time.Second, mergeReq, func(_ context.Context, key string, in req) (int, error) {
		calls.Add(1)
		got = in
		return in.size, nil
	})
	var wg sync.WaitGroup
	results := make([]error, 3)
	inputs := []req{{size: 10}, {iops: 3000}, {size: 20}}
	for i, in := range inputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i > 0 {
				time.Sleep(5 * time.Millisecond * time.Duration(i))
			}
			out, err := c.Submit(context.Background(), "vol-1", in)
			results[i] = err
			if err == nil && out != 10 {
				t.Errorf("caller %d got %d", i, out)
			}
		}()
	}
	wg.Wait()
	if results[0] != nil || results[1] != nil || !errors.Is(results[2], errConflict) {
		t.Fatalf("results = %v", results)
	}
	if calls.Load() != 1 || got != (req{size: 10, iops: 3000}) {
		t.Fatalf("calls = %d, merged = %+v", calls.Load(), got)
	}
	// A new window starts after execution.
	if out, err := c.Submit(context.Background(), "vol-1", req{size: 30}); err != nil || out != 30 || calls.Load() != 2 {
		t.Fatalf("second window: %d, %v, calls %d", out, err, calls.Load())
	}
}
