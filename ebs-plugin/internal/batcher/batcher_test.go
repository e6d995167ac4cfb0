package batcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBatcherMergesConcurrentKeys(t *testing.T) {
	var calls atomic.Int32
	var sizes sync.Map
	b := New(100, 50*time.Millisecond, time.Second, func(_ context.Context, keys []string) (map[string]string, error) {
		n := calls.Add(1)
		sizes.Store(n, len(keys))
		out := map[string]string{}
		for _, k := range keys {
			if k != "missing" {
				out[k] = "v-" + k
			}
		}
		return out, nil
	})
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("k%d", i%20) // every key asked twice
			v, err := b.Get(context.Background(), key)
			if err != nil || v != "v-"+key {
				errs <- fmt.Errorf("%s: got %q, %v", key, v, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if calls.Load() != 1 {
		t.Fatalf("exec called %d times, want 1", calls.Load())
	}
	if n, _ := sizes.Load(int32(1)); n != 20 {
		t.Fatalf("batch had %v keys, want 20 (duplicates share a slot)", n)
	}
	if _, err := b.Get(context.Background(), "missing"); !errors.Is(err, ErrNotInResult) {
		t.Fatalf("missing key: err = %v", err)
	}
}

func TestBatcherFlushesWhenFull(t *testing.T) {
	var calls atomic.Int32
	b := New(2, time.Hour, time.Second, func(_ context.Context, keys []int) (map[int]int, error) {
		calls.Add(1)
		out := map[int]int{}
		for _, k := range keys {
			out[k] = k * 2
		}
		return out, nil
	})
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v, err := b.Get(context.Background(), i); err != nil || v != i*2 {
				t.Errorf("key %d: %d, %v", i, v, err)
			}
		}()
	}
	wg.Wait()
	if calls.Load() != 1 {
		t.Fatalf("calls = %d", calls.Load())
	}
}

func TestBatcherErrorFailsEveryKeyAndCallerContextIsHonoured(t *testing.T) {
	boom := errors.New("boom")
	b := New(10, 10*time.Millisecond, time.Second, func(context.Context, []string) (map[string]string, error) {
		return nil, boom
	})
	if _, err := b.Get(context.Background(), "a"); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	slow := New(10, time.Hour, time.Second, func(context.Context, []string) (map[string]string, error) { return nil, nil })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := slow.Get(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}
