// Package slow holds the claims whose last operation failed as infeasible (an expansion to a size the driver
// refuses, a VolumeAttributesClass it cannot apply). Retrying those at the queue's exponential pace only
// repeats the same refusal and the same Warning Event, so they wait --retry-interval-max, unless the user
// changes what they asked for, which the callers detect by the target they keep here.
package slow

import (
	"sync"
	"time"
)

// Set maps a claim key to the target that failed and when it may be tried again. Safe for concurrent use.
type Set struct {
	wait time.Duration
	now  func() time.Time

	mu    sync.Mutex
	items map[string]entry
}

type entry struct {
	target string
	until  time.Time
}

// New returns a Set whose entries wait for wait. now is the clock; nil means time.Now.
func New(wait time.Duration, now func() time.Time) *Set {
	if now == nil {
		now = time.Now
	}
	return &Set{wait: wait, now: now, items: map[string]entry{}}
}

// Add records that target failed as infeasible for key, unless the same target is already waiting (a repeat
// sync must not push the retry further out).
func (s *Set) Add(key, target string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.items[key]; ok && e.target == target {
		return
	}
	s.items[key] = entry{target: target, until: s.now().Add(s.wait)}
}

// Remaining is how long key must still wait before target is tried again: 0 when it need not wait, because
// nothing failed, the wait is over, or the user now asks for something else.
func (s *Set) Remaining(key, target string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.items[key]
	if !ok || e.target != target {
		return 0
	}
	if left := e.until.Sub(s.now()); left > 0 {
		return left
	}
	return 0
}

// Remove forgets key.
func (s *Set) Remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.items, key)
}
