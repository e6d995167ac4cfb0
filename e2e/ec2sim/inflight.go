package ec2sim

import "sync"

// inFlight counts, per action, the requests admitted and not yet answered, so a test can act while the
// emulator holds a call (its injected latency) without guessing at timing.
type inFlight struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *inFlight) add(action string, d int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	f.n[action] += d
}

func (f *inFlight) get(action string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[action]
}

// InFlight is the number of requests for action the emulator has admitted and not answered yet: held in an
// injected latency, or being carried out.
func (s *Server) InFlight(action string) int { return s.inFlight.get(action) }
