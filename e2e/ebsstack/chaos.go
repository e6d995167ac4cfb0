package ebsstack

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// Kill is one planned SIGKILL: Target (a process name of the stack) is killed At after the plan starts.
type Kill struct {
	At     time.Duration
	Target string
}

// PlanKills spreads count kills of each target uniformly over [from, to) after the start, drawing from
// rng, and returns them in time order. The same rng state gives the same plan, so a seed replays a run.
func PlanKills(rng *rand.Rand, from, to time.Duration, counts map[string]int) []Kill {
	targets := make([]string, 0, len(counts))
	for t := range counts {
		targets = append(targets, t)
	}
	slices.Sort(targets) // map order must not leak into the draws
	var out []Kill
	for _, t := range targets {
		for range counts[t] {
			out = append(out, Kill{At: from + time.Duration(rng.Int64N(int64(to-from))), Target: t})
		}
	}
	slices.SortStableFunc(out, func(a, b Kill) int { return int(a.At - b.At) })
	return out
}

// Chaos carries out kill plans on a Stack (Execute) and, like a kubelet, restarts every process of the
// stack that ends (Supervise), whether killed by a plan or ended on its own: a sidecar exits when it finds
// the controller's socket gone, as upstream's do, which gRPC notices only at its next call. It logs every
// event.
type Chaos struct {
	s    *Stack
	rng  *rand.Rand
	logf func(format string, args ...any)

	start time.Time

	mu     sync.Mutex
	killed map[*Process]bool
	events []string
	// ownExits counts the processes that ended without being killed by the plan, by name.
	ownExits map[string]int
	// kills are the kills Execute made, and phaseStarts when each call of Execute began (Recoveries).
	kills       []KillRecord
	phaseStarts []time.Time
}

// NewChaos prepares chaos on s; rng draws the restart back-offs (only Supervise uses it), logf (may be nil)
// gets every event too, timed from NewChaos.
func NewChaos(s *Stack, rng *rand.Rand, logf func(format string, args ...any)) *Chaos {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Chaos{s: s, rng: rng, logf: logf, start: time.Now(), killed: map[*Process]bool{}, ownExits: map[string]int{}}
}

// Supervise restarts every process of the stack that ends, after a random back-off of 100 to 800 ms,
// until ctx ends. It returns early with an error only when a process cannot be started, or five restarts
// in a row of one process ended before it served. Run it in its own goroutine and end it before
// the stack stops, or a restart could outlive Stop.
func (c *Chaos) Supervise(ctx context.Context) error {
	restartAt := map[string]time.Time{}
	failed := map[string]int{}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		now := time.Now()
		for _, p := range c.s.Processes() {
			if _, pending := restartAt[p.Name]; !pending {
				if done, err := p.Exited(); done {
					c.ended(p, err)
					restartAt[p.Name] = now.Add(time.Duration(100+c.rng.IntN(700)) * time.Millisecond)
				}
			}
		}
		for name, at := range restartAt {
			if now.Before(at) {
				continue
			}
			delete(restartAt, name)
			if err := c.restart(ctx, name, failed); err != nil || ctx.Err() != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// ended records that p ended, counting it as an own exit unless the plan killed it.
func (c *Chaos) ended(p *Process, err error) {
	c.mu.Lock()
	killed := c.killed[p]
	if !killed {
		c.ownExits[p.Name]++
	}
	c.mu.Unlock()
	if !killed {
		c.event("%s (pid %d) ended on its own: %v", p.Name, p.Pid(), err)
	}
}

// restart starts the named process again. A start that ends before it serves (a kill of the plan can land
// during start-up) is left for the next round, unless the process failed so failed[name] times in a row
// without being killed; that, or a process that cannot be started at all, is an error. An error while ctx
// ends is not.
func (c *Chaos) restart(ctx context.Context, name string, failed map[string]int) error {
	p, err := c.s.Restart(ctx, name)
	switch {
	case ctx.Err() != nil:
		return nil
	case err != nil && p == nil:
		return fmt.Errorf("restart %s: %w", name, err)
	case err != nil:
		first, _, _ := strings.Cut(err.Error(), "\n") // the rest is the log tail
		c.event("restarted %s (pid %d), which ended before serving: %s", name, p.Pid(), first)
		c.mu.Lock()
		killed := c.killed[p]
		c.mu.Unlock()
		if killed {
			return nil
		}
		if failed[name]++; failed[name] >= 5 {
			return fmt.Errorf("restart %s: %d times in a row it did not serve: %w", name, failed[name], err)
		}
	default:
		failed[name] = 0
		c.event("restarted %s (pid %d)", name, p.Pid())
	}
	return nil
}

// Execute kills per plan, its times relative to now, and returns after the last kill; Supervise restarts
// the killed processes. A target that is down at its time is killed as soon as it runs again.
func (c *Chaos) Execute(ctx context.Context, plan []Kill) error {
	start := time.Now()
	c.mu.Lock()
	phase := len(c.phaseStarts)
	c.phaseStarts = append(c.phaseStarts, start)
	c.mu.Unlock()
	for _, k := range plan {
		t := time.NewTimer(time.Until(start.Add(k.At)))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if c.s.Process(k.Target) == nil {
			return fmt.Errorf("kill plan names %q, not a process of the stack", k.Target)
		}
		// A sidecar ends on its own when the controller is killed; kill its successor instead, so every
		// planned kill lands on a running process.
		var p *Process
		err := poll(ctx, k.Target+" running again", func(context.Context) (bool, string, error) {
			p = c.s.Process(k.Target)
			done, _ := p.Exited()
			return !done, "down", nil
		})
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.killed[p] = true
		c.mu.Unlock()
		at := time.Now()
		if err := c.s.Kill(ctx, k.Target); err != nil {
			return err
		}
		c.mu.Lock()
		c.kills = append(c.kills, KillRecord{Target: k.Target, Pid: p.Pid(), Phase: phase, At: at, Dead: time.Now()})
		c.mu.Unlock()
		c.event("SIGKILL %s (pid %d)", k.Target, p.Pid())
	}
	return nil
}

// WaitRunning waits until every process of the stack runs.
func (c *Chaos) WaitRunning(ctx context.Context) error {
	return poll(ctx, "every process running", func(context.Context) (bool, string, error) {
		var down []string
		for _, p := range c.s.Processes() {
			if done, _ := p.Exited(); done {
				down = append(down, p.Name)
			}
		}
		return len(down) == 0, fmt.Sprintf("down: %v", down), nil
	})
}

func (c *Chaos) event(format string, args ...any) {
	line := fmt.Sprintf("+%6.2fs ", time.Since(c.start).Seconds()) + fmt.Sprintf(format, args...)
	c.mu.Lock()
	c.events = append(c.events, line)
	c.mu.Unlock()
	c.logf("chaos: %s", line)
}

// Events are the lines logged so far.
func (c *Chaos) Events() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.events, "\n")
}

// OwnExits counts, by process name, the processes that ended without being killed by the plan.
func (c *Chaos) OwnExits() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.ownExits))
	for k, v := range c.ownExits {
		out[k] = v
	}
	return out
}
