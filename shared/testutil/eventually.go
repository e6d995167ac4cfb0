package testutil

import (
	"testing"
	"time"
)

// PollInterval is how often Eventually asks again: short, because unit tests wait on in-process work.
const PollInterval = 10 * time.Millisecond

// Eventually calls cond until it returns true, and fails the test naming what it waited for, with cond's last
// error, once timeout has passed. It waits for a positive signal; it never asserts on elapsed time.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	if err := Poll(timeout, PollInterval, cond); err != nil {
		t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
	}
}

// Poll calls cond every interval until it returns true (nil) or timeout passes (an error carrying cond's last
// error, if it returned one). For callers that are not tests, or that report the failure themselves.
func Poll(timeout, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if !time.Now().Before(deadline) {
			if last != nil {
				return last
			}
			return errTimeout
		}
		time.Sleep(interval)
	}
}

type timeoutError struct{}

func (timeoutError) Error() string { return "condition still false" }

var errTimeout error = timeoutError{}
