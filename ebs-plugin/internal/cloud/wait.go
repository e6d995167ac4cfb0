package cloud

import (
	"context"
	"errors"
	"time"
)

// Backoff is an exponential polling schedule: Steps polls, the first immediately, then sleeps of Initial,
// Initial*Factor, ...
type Backoff struct {
	Initial time.Duration
	Factor  float64
	Steps   int
}

var errWaitTimeout = errors.New("timed out waiting for the expected state")

// poll runs cond until it reports done, returns an error, the steps run out, or ctx ends.
func poll(ctx context.Context, b Backoff, cond func(context.Context) (bool, error)) error {
	delay := b.Initial
	for step := 0; step < b.Steps; step++ {
		done, err := cond(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if step == b.Steps-1 {
			break
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = time.Duration(float64(delay) * b.Factor)
	}
	return errWaitTimeout
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
