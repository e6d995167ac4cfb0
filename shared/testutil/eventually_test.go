package testutil

import (
	"errors"
	"testing"
	"time"
)

func TestPollReturnsOnceTrue(t *testing.T) {
	calls := 0
	err := Poll(time.Minute, time.Millisecond, func() (bool, error) {
		calls++
		return calls == 3, nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Poll() = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestPollTimesOutWithLastError(t *testing.T) {
	want := errors.New("not yet: phase Pending")
	err := Poll(0, time.Millisecond, func() (bool, error) { return false, want })
	if !errors.Is(err, want) {
		t.Fatalf("Poll() = %v, want the condition's last error %v", err, want)
	}
	if err := Poll(0, time.Millisecond, func() (bool, error) { return false, nil }); err == nil {
		t.Fatal("Poll() of a condition that never holds = nil, want an error")
	}
}
