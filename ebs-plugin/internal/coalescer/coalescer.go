// Package coalescer merges requests for one key that arrive within a window into one execution. The EBS
// driver sends ControllerExpandVolume and ControllerModifyVolume for a volume through it, so a PVC resize and
// a VolumeAttributesClass change become one ModifyVolume: EC2 allows one modification per volume every six
// hours, so two separate calls would leave the second one failing for hours.
package coalescer

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Merge combines a new input into the pending one, or returns an error (for that caller only) when they
// conflict.
type Merge[I any] func(pending, next I) (I, error)

// Exec performs the merged request.
type Exec[K comparable, I, O any] func(ctx context.Context, key K, in I) (O, error)

// Config times a Coalescer.
type Config struct {
	// Window is how long inputs for a key are collected after the first one.
	Window time.Duration
	// Timeout bounds each execution.
	Timeout time.Duration
	// Clock times the window; nil means the real clock. Tests pass a fake one to decide when a window closes.
	Clock clock.WithDelayedExecution
}

type result[O any] struct {
	out O
	err error
}

type pending[I, O any] struct {
	// ctx carries the first caller's values (its logger among them) without its cancellation: the execution
	// logs as that caller, and one caller giving up must not fail the others who share the result.
	ctx     context.Context
	in      I
	waiters []chan result[O]
}

// Coalescer runs Exec once per key per window with the merge of every input submitted in that window.
type Coalescer[K comparable, I, O any] struct {
	cfg   Config
	merge Merge[I]
	exec  Exec[K, I, O]

	mu      sync.Mutex
	pending map[K]*pending[I, O]
}

// New returns a Coalescer.
func New[K comparable, I, O any](cfg Config, merge Merge[I], exec Exec[K, I, O]) *Coalescer[K, I, O] {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Coalescer[K, I, O]{cfg: cfg, merge: merge, exec: exec, pending: map[K]*pending[I, O]{}}
}

// Submit adds in to the window for key and waits for the shared result. An input that conflicts with the
// window's fails at once and does not join it.
func (c *Coalescer[K, I, O]) Submit(ctx context.Context, key K, in I) (O, error) {
	ch := make(chan result[O], 1)
	c.mu.Lock()
	p, ok := c.pending[key]
	if ok {
		merged, err := c.merge(p.in, in)
		if err != nil {
			c.mu.Unlock()
			var zero O
			return zero, err
		}
		p.in = merged
	} else {
		p = &pending[I, O]{ctx: context.WithoutCancel(ctx), in: in}
		c.pending[key] = p
		c.cfg.Clock.AfterFunc(c.cfg.Window, func() { c.run(key, p) })
	}
	p.waiters = append(p.waiters, ch)
	c.mu.Unlock()
	select {
	case r := <-ch:
		return r.out, r.err
	case <-ctx.Done():
		var zero O
		return zero, ctx.Err()
	}
}

// Waiting reports how many Submit calls wait on key's open window. Tests use it to learn that every caller
// has joined before they close the window.
func (c *Coalescer[K, I, O]) Waiting(key K) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pending[key]; ok {
		return len(p.waiters)
	}
	return 0
}

func (c *Coalescer[K, I, O]) run(key K, p *pending[I, O]) {
	c.mu.Lock()
	delete(c.pending, key)
	in := p.in
	waiters := p.waiters
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(p.ctx, c.cfg.Timeout)
	defer cancel()
	out, err := c.exec(ctx, key, in)
	for _, ch := range waiters {
		ch <- result[O]{out: out, err: err}
	}
}
