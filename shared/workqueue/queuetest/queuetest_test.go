package queuetest

import (
	"context"
	"errors"
	"testing"
)

// fakeInformers records the factory calls RunController makes.
type fakeInformers struct{ started, shutdown bool }

func (f *fakeInformers) Start(<-chan struct{}) { f.started = true }
func (f *fakeInformers) Shutdown()             { f.shutdown = true }

func TestRunControllerStopsTheRunAndTheInformersWhenTheTestEnds(t *testing.T) {
	informers := &fakeInformers{}
	ended := make(chan struct{})
	t.Run("controller test", func(t *testing.T) {
		RunController(t, t.Context(), informers, func(ctx context.Context) error {
			<-ctx.Done()
			close(ended)
			return nil
		})
		if !informers.started {
			t.Error("informers not started")
		}
	})
	select {
	case <-ended:
	default:
		t.Error("run still running after its test ended")
	}
	if !informers.shutdown {
		t.Error("informers not shut down after the test ended")
	}
}

func TestRunControllerReportsARunError(t *testing.T) {
	rec := &recordingTB{TB: t}
	RunController(rec, t.Context(), &fakeInformers{}, func(ctx context.Context) error {
		<-ctx.Done()
		return errors.New("lost the lease")
	})
	rec.cleanup()
	if !rec.failed {
		t.Error("the run's error did not fail the test")
	}
}

func TestSlowRetryQueuesHoldAFailedKeyBack(t *testing.T) {
	q := SlowRetry(t)("test")
	defer q.ShutDown()
	q.AddRateLimited("key")
	if n := q.Len(); n != 0 {
		t.Errorf("queue length right after a rate-limited add = %d, want 0: the retry waits an hour", n)
	}
}

// recordingTB notes failures and holds cleanups for the test to run, instead of failing the test that runs it.
type recordingTB struct {
	testing.TB
	failed   bool
	cleanups []func()
}

func (r *recordingTB) Helper()               { r.TB.Helper() }
func (r *recordingTB) Errorf(string, ...any) { r.failed = true }
func (r *recordingTB) Cleanup(f func())      { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}
