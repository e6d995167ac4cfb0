package csiconn

import (
	"context"
	"sync"
)

// Pending remembers the work items whose last attempt failed or is still running: the ones to retry at once
// when the driver comes back (FollowRestarts), rather than at the end of their backoff. An item leaves it when
// an attempt succeeds; an item whose object is gone leaves it at the retry, which then succeeds doing nothing.
type Pending[T comparable] struct {
	mu    sync.Mutex
	items map[T]struct{}
}

// NewPending returns an empty set.
func NewPending[T comparable]() *Pending[T] {
	return &Pending[T]{items: map[T]struct{}{}}
}

// Track wraps a work queue's process function to keep the set.
func (p *Pending[T]) Track(process func(context.Context, T) error) func(context.Context, T) error {
	return func(ctx context.Context, item T) error {
		p.mu.Lock()
		p.items[item] = struct{}{}
		p.mu.Unlock()
		err := process(ctx, item)
		if err == nil {
			p.mu.Lock()
			delete(p.items, item)
			p.mu.Unlock()
		}
		return err
	}
}

// Requeue hands every pending item to add (a work queue's Add) and returns how many there were. An item
// still running is marked by the queue to run again once it is done.
func (p *Pending[T]) Requeue(add func(T)) int {
	p.mu.Lock()
	items := make([]T, 0, len(p.items))
	for item := range p.items {
		items = append(items, item)
	}
	p.mu.Unlock()
	for _, item := range items {
		add(item)
	}
	return len(items)
}
