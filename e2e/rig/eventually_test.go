package rig

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestEventuallyKeepsPollingPastErrors(t *testing.T) {
	calls := 0
	Eventually(t, context.Background(), time.Minute, "the third call", func(context.Context) (bool, error) {
		calls++
		if calls < 3 {
			return false, errors.New("not found")
		}
		return true, nil
	})
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}
}
