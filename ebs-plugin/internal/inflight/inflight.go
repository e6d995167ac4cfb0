// Package inflight guards against concurrent duplicates of the same CSI request: the sidecars and kubelet
// retry on timeouts, and two copies of one operation on one volume must never run at once.
package inflight

import "sync"

// Set holds the keys of operations in progress.
type Set struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

// New returns an empty Set.
func New() *Set { return &Set{keys: map[string]struct{}{}} }

// Insert claims key. It returns a release function and true, or false when key is already in flight.
func (s *Set) Insert(key string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, busy := s.keys[key]; busy {
		return nil, false
	}
	s.keys[key] = struct{}{}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.keys, key)
			s.mu.Unlock()
		})
	}, true
}
