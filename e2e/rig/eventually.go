package rig

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// PollInterval is how often Eventually asks again: end-to-end conditions read an API server or a process.
const PollInterval = 100 * time.Millisecond

// Eventually calls cond until it returns true, and fails the test naming what it waited for, with cond's last
// error, once timeout has passed or ctx is done. An error from cond is kept and polling goes on, since objects
// of a real cluster appear and disappear under the test (a NotFound now is a Found later).
func Eventually(t testing.TB, ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := WaitFor(ctx, timeout, what, cond); err != nil {
		t.Fatal(err)
	}
}

// WaitFor is Eventually for code that returns its errors: the error names what it waited for and carries
// cond's last error.
func WaitFor(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, PollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
		}
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("waiting %s for %s: %w (last error: %v)", timeout, what, err, last)
	}
	return nil
}

// StartDeadline is when a harness that starts something slow (cold builds, a cluster) for t must give up:
// limit from now, but margin before the test binary's own deadline, so the start fails with its own error and
// the teardown still runs instead of the test binary panicking.
func StartDeadline(t testing.TB, limit, margin time.Duration) time.Time {
	deadline := time.Now().Add(limit)
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if testDeadline, set := d.Deadline(); set && testDeadline.Add(-margin).Before(deadline) {
			deadline = testDeadline.Add(-margin)
		}
	}
	return deadline
}
