package rig

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

func TestParallelRunsEveryItemAndReportsAnError(t *testing.T) {
	var done atomic.Int64
	if err := Parallel(100, 8, func(i int) error { done.Add(int64(i)); return nil }); err != nil || done.Load() != 4950 {
		t.Fatalf("Parallel = %v, sum of items %d, want nil and 4950", err, done.Load())
	}
	var calls atomic.Int64
	err := Parallel(10, 3, func(i int) error {
		calls.Add(1)
		if i == 4 {
			return errors.New("boom")
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "item 4: boom") || calls.Load() != 10 {
		t.Fatalf("Parallel = %v after %d calls, want item 4's error after 10", err, calls.Load())
	}
}
