// Package workqueue builds the rate-limited work queues of the sidecars and runs their workers.
//
// Each queue retries an item with per-item exponential backoff from --retry-interval-start to
// --retry-interval-max (no global token bucket, as upstream), has a name unique in the process (its metrics
// label), and its workers drain on shutdown: items being processed finish, queued ones are left for the next
// leader.
package workqueue

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Queue is the client-go typed rate-limited queue, re-exported so callers need not import both packages.
type Queue[T comparable] = workqueue.TypedRateLimitingInterface[T]

// Config names a queue and sets its retry backoff.
type Config struct {
	// Name labels the queue's metrics; it must be unique within the Metrics it is created with.
	Name string
	// RetryIntervalStart is the delay after the first failure; it doubles with each further failure.
	RetryIntervalStart time.Duration
	// RetryIntervalMax caps the delay.
	RetryIntervalMax time.Duration
}

// NewRateLimiter returns the per-item exponential backoff limiter: start, 2*start, 4*start... capped at max.
func NewRateLimiter[T comparable](start, max time.Duration) workqueue.TypedRateLimiter[T] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[T](start, max)
}

// New creates a queue whose metrics go to m. It fails if the name is empty or already used with m, or if the
// retry intervals are not positive and ordered.
func New[T comparable](m *Metrics, cfg Config) (Queue[T], error) {
	if cfg.RetryIntervalStart <= 0 || cfg.RetryIntervalMax < cfg.RetryIntervalStart {
		return nil, fmt.Errorf("workqueue %q: retry interval start %s and max %s must be positive with start <= max",
			cfg.Name, cfg.RetryIntervalStart, cfg.RetryIntervalMax)
	}
	if err := m.claim(cfg.Name); err != nil {
		return nil, err
	}
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		NewRateLimiter[T](cfg.RetryIntervalStart, cfg.RetryIntervalMax),
		workqueue.TypedRateLimitingQueueConfig[T]{Name: cfg.Name, MetricsProvider: m},
	), nil
}

// Run processes items of q with the given number of workers until ctx is cancelled, then shuts q down and
// returns once the items being processed are done.
//
// An item whose process call succeeds is forgotten (its backoff reset); one that fails is re-added with
// backoff. process receives a context that is NOT cancelled by ctx, so in-flight work is drained rather than
// aborted: bound each call with its own timeout (--timeout). Items still queued when ctx ends are not started.
func Run[T comparable](ctx context.Context, workers int, q Queue[T], process func(context.Context, T) error) {
	if workers < 1 {
		workers = 1
	}
	workCtx := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for processNext(ctx, workCtx, q, process) {
			}
		})
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
}

// processNext handles one item and reports whether the worker should continue.
func processNext[T comparable](ctx, workCtx context.Context, q Queue[T], process func(context.Context, T) error) bool {
	item, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(item)
	// A shut-down client-go queue still hands out what was queued before; a draining worker must not start it.
	if ctx.Err() != nil {
		return true
	}
	if err := process(workCtx, item); err != nil {
		klog.FromContext(ctx).V(2).Info("Work item failed, retrying with backoff", "item", item, "requeues", q.NumRequeues(item), "err", err)
		q.AddRateLimited(item)
		return true
	}
	q.Forget(item)
	return true
}
