package workqueue

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stowage-csi/stowage/shared/testutil"
)

func newMetrics(t *testing.T) *Metrics {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBackoffGrowsAndCaps(t *testing.T) {
	tests := []struct {
		name       string
		start, max time.Duration
		want       []time.Duration
	}{
		{"upstream defaults", time.Second, 5 * time.Minute,
			[]time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second,
				64 * time.Second, 128 * time.Second, 256 * time.Second, 5 * time.Minute, 5 * time.Minute}},
		{"short cap", 100 * time.Millisecond, 300 * time.Millisecond,
			[]time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}},
		{"start equals max", time.Minute, time.Minute, []time.Duration{time.Minute, time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rl := NewRateLimiter[string](tt.start, tt.max)
			for i, want := range tt.want {
				if got := rl.When("a"); got != want {
					t.Errorf("failure %d: delay %s, want %s", i+1, got, want)
				}
			}
			// Backoff is per item: another item starts from the beginning.
			if got := rl.When("b"); got != tt.start {
				t.Errorf("other item: delay %s, want %s", got, tt.start)
			}
			rl.Forget("a")
			if got := rl.When("a"); got != tt.start {
				t.Errorf("after Forget: delay %s, want %s", got, tt.start)
			}
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	m := newMetrics(t)
	first, err := New[string](m, Config{Name: "csi-attacher-va", RetryIntervalStart: time.Second, RetryIntervalMax: time.Minute})
	if err != nil {
		t.Fatalf("first queue: %v", err)
	}
	// A queue runs goroutines until it is shut down.
	t.Cleanup(first.ShutDown)
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"duplicate name", Config{Name: "csi-attacher-va", RetryIntervalStart: time.Second, RetryIntervalMax: time.Minute}, "already in use"},
		{"empty name", Config{RetryIntervalStart: time.Second, RetryIntervalMax: time.Minute}, "must not be empty"},
		{"start above max", Config{Name: "x", RetryIntervalStart: time.Hour, RetryIntervalMax: time.Minute}, "start <= max"},
		{"zero start", Config{Name: "y", RetryIntervalMax: time.Minute}, "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New[string](m, tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
	// The same name in another process-level registry is fine.
	other, err := New[string](newMetrics(t), Config{Name: "csi-attacher-va", RetryIntervalStart: time.Second, RetryIntervalMax: time.Minute})
	if err != nil {
		t.Fatalf("same name, other Metrics: %v", err)
	}
	other.ShutDown()
}

func TestRunForgetsOnSuccessAndRetriesOnError(t *testing.T) {
	q, err := New[string](newMetrics(t), Config{Name: "q", RetryIntervalStart: time.Millisecond, RetryIntervalMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var mu sync.Mutex
	calls := map[string]int{}
	done := make(chan struct{})
	process := func(_ context.Context, item string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[item]++
		if item == "flaky" && calls[item] < 3 {
			return errors.New("transient")
		}
		if item == "flaky" {
			close(done)
		}
		return nil
	}
	finished := make(chan struct{})
	go func() { Run(ctx, 2, q, process); close(finished) }()
	q.Add("ok")
	q.Add("flaky")
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("flaky item was not retried to success")
	}
	cancel()
	<-finished

	mu.Lock()
	defer mu.Unlock()
	if calls["ok"] != 1 || calls["flaky"] != 3 {
		t.Errorf("calls = %v, want ok:1 flaky:3", calls)
	}
	if n := q.NumRequeues("flaky"); n != 0 {
		t.Errorf("NumRequeues(flaky) = %d after success, want 0 (forgotten)", n)
	}
}

func TestRunDrainsOnCancel(t *testing.T) {
	q, err := New[string](newMetrics(t), Config{Name: "q", RetryIntervalStart: time.Second, RetryIntervalMax: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	release := make(chan struct{})
	var mu sync.Mutex
	var processed []string
	var inFlightCtxErr error
	process := func(pctx context.Context, item string) error {
		if item == "slow" {
			close(started)
			<-release
			inFlightCtxErr = pctx.Err()
		}
		mu.Lock()
		processed = append(processed, item)
		mu.Unlock()
		return nil
	}
	finished := make(chan struct{})
	q.Add("slow")
	go func() { Run(ctx, 1, q, process); close(finished) }()
	<-started
	q.Add("queued-before-cancel")
	cancel()

	// Release the item only once Run has shut the queue down: a Run that did not wait for its workers has
	// returned by then, before the item is recorded as processed.
	testutil.Eventually(t, 30*time.Second, "the queue shut down", func() (bool, error) { return q.ShuttingDown(), nil })
	select {
	case <-finished:
		t.Fatal("Run returned while an item was still being processed")
	default:
	}
	close(release)
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the in-flight item finished")
	}
	q.Add("after-shutdown")

	mu.Lock()
	defer mu.Unlock()
	if len(processed) != 1 || processed[0] != "slow" {
		t.Errorf("processed %v, want only the in-flight item [slow]", processed)
	}
	if inFlightCtxErr != nil {
		t.Errorf("in-flight item's context was cancelled (%v); draining must let it finish", inFlightCtxErr)
	}
}
