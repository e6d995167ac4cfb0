// Package queuetest holds what controller tests need of the work queues: queues that retry only when told to,
// and a controller run tied to the test's life.
package queuetest

import (
	"context"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/shared/metrics"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

// SlowRetry returns a maker of named queues, with metrics on a registry of their own, whose retries wait an
// hour: a key whose sync failed then comes back only through what the test drives (a DriverBack, say), never
// through the backoff.
func SlowRetry(t testing.TB) func(name string) workqueue.Queue[string] {
	t.Helper()
	qm, err := workqueue.NewMetrics(metrics.NewRegistry().Registerer())
	if err != nil {
		t.Fatal(err)
	}
	return func(name string) workqueue.Queue[string] {
		t.Helper()
		q, err := workqueue.New[string](qm, workqueue.Config{Name: name, RetryIntervalStart: time.Hour, RetryIntervalMax: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
}

// Informers is an informer factory, as RunController starts and stops it.
type Informers interface {
	Start(stop <-chan struct{})
	Shutdown()
}

// RunController starts the informers and run, a controller's Run, until the test ends; then it cancels run's
// context, waits for run to return (an error fails the test) and shuts the informers down.
func RunController(t testing.TB, ctx context.Context, informers Informers, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(ctx)
	informers.Start(ctx.Done())
	stopped := make(chan error, 1)
	go func() { stopped <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("Run() = %v", err)
		}
		informers.Shutdown()
	})
}
