// Package batcher merges concurrent lookups of single keys into one call for many keys. The EBS driver uses
// it for DescribeVolumes, DescribeInstances, DescribeSnapshots and DescribeVolumesModifications: under load one
// call serves hundreds of waiters instead of one call each, which keeps the account under EC2's request limits.
package batcher

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrNotInResult is returned for a key the batch call answered without mentioning.
var ErrNotInResult = errors.New("key not in batch result")

// Exec looks up many keys at once. Keys absent from the map get ErrNotInResult; a returned error fails every
// key of the batch.
type Exec[K comparable, V any] func(ctx context.Context, keys []K) (map[K]V, error)

type result[V any] struct {
	v   V
	err error
}

type batch[K comparable, V any] struct {
	waiters map[K][]chan result[V]
	timer   *time.Timer
}

// Batcher collects keys until maxEntries distinct keys are waiting or maxDelay has passed since the first one,
// then runs exec once for all of them. Duplicate keys share one slot.
type Batcher[K comparable, V any] struct {
	maxEntries int
	maxDelay   time.Duration
	timeout    time.Duration
	exec       Exec[K, V]

	mu      sync.Mutex
	pending *batch[K, V]
}

// New returns a Batcher. timeout bounds each exec call; it is independent of the callers' contexts because
// one caller giving up must not fail the others.
func New[K comparable, V any](maxEntries int, maxDelay, timeout time.Duration, exec Exec[K, V]) *Batcher[K, V] {
	if maxEntries < 1 {
		maxEntries = 1
	}
	return &Batcher[K, V]{maxEntries: maxEntries, maxDelay: maxDelay, timeout: timeout, exec: exec}
}

// Get returns the value for key from the next batch.
func (b *Batcher[K, V]) Get(ctx context.Context, key K) (V, error) {
	ch := make(chan result[V], 1)
	b.mu.Lock()
	if b.pending == nil {
		p := &batch[K, V]{waiters: map[K][]chan result[V]{}}
		p.timer = time.AfterFunc(b.maxDelay, func() { b.flush(p) })
		b.pending = p
	}
	p := b.pending
	p.waiters[key] = append(p.waiters[key], ch)
	full := len(p.waiters) >= b.maxEntries
	b.mu.Unlock()
	if full {
		if p.timer.Stop() {
			go b.flush(p)
		}
	}
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
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
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
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
