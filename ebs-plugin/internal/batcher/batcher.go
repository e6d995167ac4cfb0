// Package batcher merges concurrent lookups of single keys into one call for many keys. The EBS driver uses
// it for DescribeVolumes, DescribeInstances, DescribeSnapshots and DescribeVolumesModifications: under load one
// call serves hundreds of waiters instead of one call each, which keeps the account under EC2's request limits.
package batcher

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ErrNotInResult is returned for a key the batch call answered without mentioning.
var ErrNotInResult = errors.New("key not in batch result")

// Exec looks up many keys at once. Keys absent from the map get ErrNotInResult; a returned error fails every
// key of the batch.
type Exec[K comparable, V any] func(ctx context.Context, keys []K) (map[K]V, error)

// Config sizes a Batcher.
type Config struct {
	// MaxEntries distinct keys flush a batch at once; fewer than 1 means 1.
	MaxEntries int
	// MaxDelay is how long a batch waits for more keys after its first one.
	MaxDelay time.Duration
	// Timeout bounds each Exec call.
	Timeout time.Duration
	// Clock times MaxDelay; nil means the real clock. Tests pass a fake one to decide when a batch flushes.
	Clock clock.WithDelayedExecution
}

type result[V any] struct {
	v   V
	err error
}

type batch[K comparable, V any] struct {
	// ctx carries the first caller's values (its logger among them) without its cancellation: the batch
	// logs as that caller, and one caller giving up must not fail the others.
	ctx     context.Context
	waiters map[K][]chan result[V]
	callers int
	timer   clock.Timer
}

// Batcher collects keys until MaxEntries distinct keys are waiting or MaxDelay has passed since the first one,
// then runs exec once for all of them. Duplicate keys share one slot.
type Batcher[K comparable, V any] struct {
	cfg  Config
	exec Exec[K, V]

	mu      sync.Mutex
	pending *batch[K, V]
}

// New returns a Batcher.
func New[K comparable, V any](cfg Config, exec Exec[K, V]) *Batcher[K, V] {
	if cfg.MaxEntries < 1 {
		cfg.MaxEntries = 1
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Batcher[K, V]{cfg: cfg, exec: exec}
}

// Get returns the value for key from the next batch.
func (b *Batcher[K, V]) Get(ctx context.Context, key K) (V, error) {
	ch := make(chan result[V], 1)
	b.mu.Lock()
	if b.pending == nil {
		p := &batch[K, V]{ctx: context.WithoutCancel(ctx), waiters: map[K][]chan result[V]{}}
		p.timer = b.cfg.Clock.AfterFunc(b.cfg.MaxDelay, func() { b.flush(p) })
		b.pending = p
	}
	p := b.pending
	p.waiters[key] = append(p.waiters[key], ch)
	p.callers++
	full := len(p.waiters) >= b.cfg.MaxEntries
	if full {
		// Take the full batch out now, so the next caller starts a new one instead of joining a batch whose
		// keys are already being sent.
		b.pending = nil
	}
	b.mu.Unlock()
	if full && p.timer.Stop() {
		go b.flush(p)
	}
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// Waiting reports how many Get calls wait on the batch being collected (not on one already sent). Tests use
// it to learn that every caller has joined before they let the batch go.
func (b *Batcher[K, V]) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending == nil {
		return 0
	}
	return b.pending.callers
}

func (b *Batcher[K, V]) flush(p *batch[K, V]) {
	b.mu.Lock()
	if b.pending == p {
		b.pending = nil
	}
	b.mu.Unlock()
	keys := make([]K, 0, len(p.waiters))
	for k := range p.waiters {
		keys = append(keys, k)
	}
	ctx, cancel := context.WithTimeout(p.ctx, b.cfg.Timeout)
	defer cancel()
	values, err := b.exec(ctx, keys)
	for k, chans := range p.waiters {
		r := result[V]{err: err}
		if err == nil {
			v, ok := values[k]
			if !ok {
				r.err = ErrNotInResult
			}
			r.v = v
		}
		for _, ch := range chans {
			ch <- r
		}
	}
}
