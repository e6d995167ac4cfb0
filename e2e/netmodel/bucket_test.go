//go:build bench

package netmodel

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stowage-csi/stowage/e2e/rig"
)

func TestBucketReservations(t *testing.T) {
	type step struct {
		advance time.Duration
		take    int
		wait    time.Duration
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a full bucket lets its burst through at once", []step{{0, 500, 0}}},
		{"beyond the burst, the debt is waited off at the rate", []step{{0, 500, 0}, {0, 100, 100 * time.Millisecond}}},
		{"debts of concurrent callers queue up", []step{{0, 500, 0}, {0, 100, 100 * time.Millisecond}, {0, 100, 200 * time.Millisecond}}},
		{"time refills the bucket", []step{{0, 500, 0}, {300 * time.Millisecond, 300, 0}, {0, 1, time.Millisecond}}},
		{"a caller that woke late loses nothing", []step{{0, 500, 0}, {0, 100, 100 * time.Millisecond}, {150 * time.Millisecond, 50, 0}}},
		{"idle time fills no more than the burst", []step{{0, 500, 0}, {time.Hour, 500, 0}, {0, 1, time.Millisecond}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clocktesting.NewFakeClock(time.Unix(0, 0))
			b := NewBucket(c, 1000, 500)
			for i, s := range tc.steps {
				c.Step(s.advance)
				if got := b.reserve(s.take); got != s.wait {
					t.Fatalf("step %d: take %d after %v: wait %v, want %v", i, s.take, s.advance, got, s.wait)
				}
			}
		})
	}
}

func TestBucketWaitReturnsOnceTheDebtIsRepaid(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Unix(0, 0))
	b := NewBucket(c, 1000, 100)
	if err := b.Wait(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Wait(context.Background(), 50) }()
	waitForTimer(t, c)
	c.Step(49 * time.Millisecond)
	// The waiter's timer is for 50 ms: it cannot have fired.
	if !c.HasWaiters() {
		t.Fatal("Wait's timer fired 1 ms early")
	}
	c.Step(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestBucketWaitEndsWithItsContext(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Unix(0, 0))
	b := NewBucket(c, 1000, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctx, 200) }()
	waitForTimer(t, c)
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Wait after cancel: %v", err)
	}
}

// waitForTimer waits until something waits on the fake clock.
func waitForTimer(t *testing.T, c *clocktesting.FakeClock) {
	t.Helper()
	rig.Eventually(t, context.Background(), 10*time.Second, "a timer on the fake clock", func(context.Context) (bool, error) {
		return c.HasWaiters(), nil
	})
}
