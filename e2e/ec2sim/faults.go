package ec2sim

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Faults is an injectable fault profile. Rates are probabilities in [0, 1] per matching request.
type Faults struct {
	// Actions limits the request faults to these actions; empty means every action.
	Actions []string `json:"actions,omitempty"`
	// ThrottleRate answers 503 RequestLimitExceeded (the SDK retries it).
	ThrottleRate float64 `json:"throttleRate,omitempty"`
	// InternalErrorRate answers 500 InternalError.
	InternalErrorRate float64 `json:"internalErrorRate,omitempty"`
	// DropRate closes the connection without an answer.
	DropRate float64 `json:"dropRate,omitempty"`
	// Latency is added before each matching request is served (JSON: nanoseconds).
	Latency time.Duration `json:"latency,omitempty"`
	// Budget, when positive, stops the throttle, internal-error and drop faults after that many of them.
	Budget int `json:"budget,omitempty"`
	// StuckAttach leaves new attachments in `attaching` until they are detached.
	StuckAttach bool `json:"stuckAttach,omitempty"`
	// LostAnswerRate carries out a mutating action (CreateVolume, AttachVolume, CreateSnapshot...) and then
	// loses the answer: half the time the connection is closed, half the time 500 InternalError is returned.
	// It is how production drivers leak volumes and snapshots or act twice: the caller cannot tell it from
	// a request that never ran.
	LostAnswerRate float64 `json:"lostAnswerRate,omitempty"`
	// Slow holds some calls of one action longer than the others, by action name ("AttachVolume"): a
	// congested attach on EC2's side, while every other call answers at once. It applies whatever Actions
	// says and is not bounded by Budget; each slowed call is counted in ec2sim_slowed_requests_total.
	Slow map[string]SlowCalls `json:"slow,omitempty"`
	// Seed seeds the faults' randomness, so a run's faults replay when its requests come in the same order.
	// Zero picks a seed; Server.FaultSeed reports the one in use.
	Seed uint64 `json:"seed,omitempty"`
}

// SlowCalls slows a share of one action's calls: each call is held Latency (JSON: nanoseconds) before it is
// served with probability Rate, drawn from the faults' seeded source, so a seed replays which calls were slow.
type SlowCalls struct {
	Rate    float64       `json:"rate"`
	Latency time.Duration `json:"latency"`
}

func (f Faults) validate() error {
	for name, r := range map[string]float64{"throttleRate": f.ThrottleRate, "internalErrorRate": f.InternalErrorRate, "dropRate": f.DropRate, "lostAnswerRate": f.LostAnswerRate} {
		if r < 0 || r > 1 {
			return fmt.Errorf("%s %v is not in [0, 1]", name, r)
		}
	}
	if f.Latency < 0 {
		return fmt.Errorf("latency %v is negative", f.Latency)
	}
	if f.Budget < 0 {
		return fmt.Errorf("budget %d is negative", f.Budget)
	}
	for action, sc := range f.Slow {
		if _, known := actions[action]; !known {
			return fmt.Errorf("slow: %q is not an action of the emulator", action)
		}
		if sc.Rate < 0 || sc.Rate > 1 {
			return fmt.Errorf("slow %s: rate %v is not in [0, 1]", action, sc.Rate)
		}
		if sc.Latency <= 0 {
			return fmt.Errorf("slow %s: latency %v is not positive", action, sc.Latency)
		}
	}
	return nil
}

type faultKind int

const (
	faultNone faultKind = iota
	faultThrottle
	faultInternal
	faultDrop
	// faultLostDrop and faultLostInternal run the action, then close the connection or answer 500.
	faultLostDrop
	faultLostInternal
)

type faultInjector struct {
	mu     sync.Mutex
	f      Faults
	budget int
	// seed is the seed in use: f.Seed, or the one picked when that is zero.
	seed uint64
	rng  *rand.Rand
}

func newFaultInjector(f Faults) *faultInjector {
	fi := &faultInjector{}
	fi.set(f)
	return fi
}

func (fi *faultInjector) set(f Faults) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	fi.seed = f.Seed
	if fi.seed == 0 {
		fi.seed = rand.Uint64() | 1
	}
	fi.f = f
	fi.budget = f.Budget
	fi.rng = rand.New(rand.NewPCG(fi.seed, fi.seed^0x5eed))
}

func (fi *faultInjector) get() Faults {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	f := fi.f
	f.Actions = append([]string(nil), fi.f.Actions...)
	f.Slow = maps.Clone(fi.f.Slow)
	f.Budget = fi.budget
	return f
}

func (fi *faultInjector) currentSeed() uint64 {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	return fi.seed
}

func (fi *faultInjector) stuckAttach() bool {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	return fi.f.StuckAttach
}

// decision is what the faults do to one request: the fault to answer with, how long to hold it first, and
// whether Faults.Slow is part of that hold.
type decision struct {
	kind   faultKind
	delay  time.Duration
	slowed bool
}

// decide picks the fault for this request, if any, and its hold: the added latency of a request Actions
// selects, plus the action's Slow latency when that draw slows it. Only a mutating action can lose its
// answer: a lost Describe is just a drop. The draws come from the seeded source in a fixed order (the fault,
// then the slowing), so a seed replays both.
func (fi *faultInjector) decide(action string, mutating bool) decision {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	f := fi.f
	var d decision
	if len(f.Actions) == 0 || slices.Contains(f.Actions, action) {
		d.kind, d.delay = fi.drawLocked(f, mutating), f.Latency
	}
	if sc, ok := f.Slow[action]; ok && sc.Rate > 0 && fi.rng.Float64() < sc.Rate {
		d.delay += sc.Latency
		d.slowed = true
	}
	return d
}

// hold waits d, or until the caller has gone away.
func hold(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// drawLocked draws the fault of a request that Actions selects, within the budget; fi.mu is held.
func (fi *faultInjector) drawLocked(f Faults, mutating bool) faultKind {
	if f.Budget > 0 && fi.budget <= 0 {
		return faultNone
	}
	rng := fi.rng
	kind := faultNone
	switch {
	case f.DropRate > 0 && rng.Float64() < f.DropRate:
		kind = faultDrop
	case f.ThrottleRate > 0 && rng.Float64() < f.ThrottleRate:
		kind = faultThrottle
	case f.InternalErrorRate > 0 && rng.Float64() < f.InternalErrorRate:
		kind = faultInternal
	case mutating && f.LostAnswerRate > 0 && rng.Float64() < f.LostAnswerRate:
		kind = faultLostDrop
		if rng.IntN(2) == 1 {
			kind = faultLostInternal
		}
	}
	if kind != faultNone && f.Budget > 0 {
		fi.budget--
	}
	return kind
}
