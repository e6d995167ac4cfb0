//go:build bench

package netmodel

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Bucket is a token bucket shared by every connection of one direction: it refills at rate bytes per
// second up to burst bytes. A caller takes what it has just moved and waits off any debt, so callers
// are served in the order they ask and a late timer wake-up is not lost: the refill follows the clock,
// not the number of wake-ups.
type Bucket struct {
	clock clock.Clock
	rate  float64 // bytes per second
	burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// NewBucket returns a full bucket.
func NewBucket(c clock.Clock, bytesPerSecond, burst int64) *Bucket {
	return &Bucket{clock: c, rate: float64(bytesPerSecond), burst: float64(burst), tokens: float64(burst), last: c.Now()}
}

// reserve takes n bytes' worth of tokens now, going into debt if there are not enough, and returns how
// long the caller must wait for the debt to be repaid.
func (b *Bucket) reserve(n int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// Wait takes n bytes and returns once the bucket can afford them, or when ctx ends.
func (b *Bucket) Wait(ctx context.Context, n int) error {
	d := b.reserve(n)
	if d <= 0 {
		return nil
	}
	t := b.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
