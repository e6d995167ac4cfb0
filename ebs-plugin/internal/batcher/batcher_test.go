package batcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stowage-csi/stowage/shared/testutil"
)

const (
	delay   = time.Second
	timeout = time.Minute // how long a test waits for a positive signal
)

type got[V any] struct {
	v   V
	err error
}

// getAsync calls Get in a goroutine; the channel delivers its answer.
func getAsync[K comparable, V any](ctx context.Context, b *Batcher[K, V], key K) <-chan got[V] {
	ch := make(chan got[V], 1)
	go func() {
		v, err := b.Get(ctx, key)
		ch <- got[V]{v, err}
	}()
	return ch
}

// waitJoined returns once n callers wait on the batch being collected.
func waitJoined[K comparable, V any](t *testing.T, b *Batcher[K, V], n int) {
	t.Helper()
	testutil.Eventually(t, timeout, fmt.Sprintf("%d callers to join the batch", n), func() (bool, error) {
		if w := b.Waiting(); w != n {
			return false, fmt.Errorf("%d waiting", w)
		}
		return true, nil
	})
}

func TestBatcherMergesConcurrentKeys(t *testing.T) {
	var calls atomic.Int32
	var sizes sync.Map
	clk := clocktesting.NewFakeClock(time.Now())
	b := New(Config{MaxEntries: 100, MaxDelay: delay, Timeout: time.Second, Clock: clk}, func(_ context.Context, keys []string) (map[string]string, error) {
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
	answers := map[string][]<-chan got[string]{}
	for i := range 40 {
		key := fmt.Sprintf("k%d", i%20) // every key asked twice
		answers[key] = append(answers[key], getAsync(context.Background(), b, key))
	}
	waitJoined(t, b, 40)
	if n := calls.Load(); n != 0 {
		t.Fatalf("exec ran %d times before the delay passed", n)
	}
	clk.Step(delay)
	for key, chans := range answers {
		for _, ch := range chans {
			if r := <-ch; r.err != nil || r.v != "v-"+key {
				t.Errorf("%s: got %q, %v", key, r.v, r.err)
			}
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("exec called %d times, want 1", calls.Load())
	}
	if n, _ := sizes.Load(int32(1)); n != 20 {
		t.Fatalf("batch had %v keys, want 20 (duplicates share a slot)", n)
	}

	missing := getAsync(context.Background(), b, "missing")
	waitJoined(t, b, 1)
	clk.Step(delay)
	if r := <-missing; !errors.Is(r.err, ErrNotInResult) {
		t.Fatalf("missing key: err = %v", r.err)
	}
}

func TestBatcherFlushesWhenFullAndStartsANewBatch(t *testing.T) {
	var calls atomic.Int32
	clk := clocktesting.NewFakeClock(time.Now()) // never stepped: only a full batch flushes
	b := New(Config{MaxEntries: 2, MaxDelay: time.Hour, Timeout: time.Second, Clock: clk}, func(_ context.Context, keys []int) (map[int]int, error) {
		calls.Add(1)
		out := map[int]int{}
		for _, k := range keys {
			out[k] = k * 2
		}
		return out, nil
	})
	first := getAsync(context.Background(), b, 1)
	waitJoined(t, b, 1)
	second := getAsync(context.Background(), b, 2)
	for i, ch := range []<-chan got[int]{first, second} {
		if r := <-ch; r.err != nil || r.v != (i+1)*2 {
			t.Errorf("key %d: %d, %v", i+1, r.v, r.err)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("calls = %d", calls.Load())
	}
	// The full batch left: a later key waits for a batch of its own.
	third := getAsync(context.Background(), b, 3)
	waitJoined(t, b, 1)
	fourth := getAsync(context.Background(), b, 4)
	<-third
	<-fourth
	if calls.Load() != 2 {
		t.Fatalf("calls = %d, want 2", calls.Load())
	}
}

func TestBatcherErrorFailsEveryKey(t *testing.T) {
	boom := errors.New("boom")
	clk := clocktesting.NewFakeClock(time.Now())
	b := New(Config{MaxEntries: 10, MaxDelay: delay, Timeout: time.Second, Clock: clk}, func(context.Context, []string) (map[string]string, error) {
		return nil, boom
	})
	a, c := getAsync(context.Background(), b, "a"), getAsync(context.Background(), b, "c")
	waitJoined(t, b, 2)
	clk.Step(delay)
	for _, ch := range []<-chan got[string]{a, c} {
		if r := <-ch; !errors.Is(r.err, boom) {
			t.Fatalf("err = %v", r.err)
		}
	}
}

type ctxKey struct{}

// The batch runs with the first caller's values (its logger) but is not cancelled when that caller gives up:
// the callers still waiting get their answer.
func TestBatcherKeepsFirstCallersValuesNotItsCancellation(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	type seen struct {
		err   error
		value any
	}
	execSaw := make(chan seen, 1)
	b := New(Config{MaxEntries: 10, MaxDelay: delay, Timeout: time.Minute, Clock: clk}, func(ctx context.Context, keys []string) (map[string]string, error) {
		execSaw <- seen{ctx.Err(), ctx.Value(ctxKey{})}
		return map[string]string{"a": "A", "b": "B"}, nil
	})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "first caller"))
	first := getAsync(ctx, b, "a")
	waitJoined(t, b, 1)
	second := getAsync(context.Background(), b, "b")
	waitJoined(t, b, 2)
	cancel()
	if r := <-first; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled caller: err = %v, want context.Canceled", r.err)
	}
	clk.Step(delay)
	if r := <-second; r.err != nil || r.v != "B" {
		t.Fatalf("other caller: %q, %v", r.v, r.err)
	}
	saw := <-execSaw
	if saw.err != nil {
		t.Errorf("exec context ended: %v", saw.err)
	}
	if saw.value != "first caller" {
		t.Errorf("exec context value = %v, want the first caller's", saw.value)
	}
}
