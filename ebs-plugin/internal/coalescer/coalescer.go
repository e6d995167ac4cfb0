// Package coalescer merges requests for one key that arrive within a window into one execution. The EBS
// driver sends ControllerExpandVolume and ControllerModifyVolume for a volume through it, so a PVC resize and
// a VolumeAttributesClass change become one ModifyVolume: EC2 allows one modification per volume every six
// hours, so two separate calls would leave the second one failing for hours.
package coalescer

import (
	"context"
	"sync"
	"time"
)

// Merge combines a new input into the pending one, or returns an error (for that caller only) when they
// conflict.
type Merge[I any] func(pending, next I) (I, error)

// Exec performs the merged request.
type Exec[K comparable, I, O any] func(ctx context.Context, key K, in I) (O, error)

type result[O any] struct {
	out O
	err error
}

type pending[I, O any] struct {
	in      I
	waiters []chan result[O]
}

// Coalescer runs Exec once per key per window with the merge of every input submitted in that window.
type Coalescer[K comparable, I, O any] struct {
	window  time.Duration
	timeout time.Duration
	merge   Merge[I]
	exec    Exec[K, I, O]

	mu      sync.Mutex
	pending map[K]*pending[I, O]
}

// New returns a Coalescer. timeout bounds each execution; it does not derive from any caller's context
// because several callers share the result.
func New[K comparable, I, O any](window, timeout time.Duration, merge Merge[I], exec Exec[K, I, O]) *Coalescer[K, I, O] {
	return &Coalescer[K, I, O]{window: window, timeout: timeout, merge: merge, exec: exec, pending: map[K]*pending[I, O]{}}
}

// Submit adds in to the window for key and waits for the shared result.
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
		p = &pending[I, O]{in: in}
		c.pending[key] = p
		time.AfterFunc(c.window, func() { c.run(key, p) })
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

func (c *Coalescer[K, I, O]) run(key K, p *pending[I, O]) {
	c.mu.Lock()
	delete(c.pending, key)
	in := p.in
	waiters := p.waiters
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	out, err := c.exec(ctx, key, in)
	for _, ch := range waiters {
		ch <- result[O]{out: out, err: err}
	}
}
