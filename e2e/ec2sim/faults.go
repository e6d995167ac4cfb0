package ec2sim

import (
	"context"
	"fmt"
	"math/rand/v2"
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
	// Seed seeds the faults' randomness, so a run's faults replay when its requests come in the same order.
	// Zero picks a seed; Server.FaultSeed reports the one in use.
	Seed uint64 `json:"seed,omitempty"`
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

// apply sleeps the added latency and picks the fault for this request, if any. Only a mutating action can
// lose its answer: a lost Describe is just a drop.
func (fi *faultInjector) apply(ctx context.Context, action string, mutating bool) faultKind {
	fi.mu.Lock()
	f := fi.f
	match := len(f.Actions) == 0
	for _, a := range f.Actions {
		if a == action {
			match = true
		}
	}
	if !match {
		fi.mu.Unlock()
		return faultNone
	}
	kind := faultNone
	exhausted := f.Budget > 0 && fi.budget <= 0
	if !exhausted {
		rng := fi.rng
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
	}
	fi.mu.Unlock()
	if f.Latency > 0 {
		t := time.NewTimer(f.Latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return kind
}
