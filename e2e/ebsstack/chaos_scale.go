package ebsstack

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

// The environment that sizes a chaos run at scale (`make chaos`); without STOWAGE_CHAOS_LIFECYCLES the chaos
// test runs its short form.
const (
	ChaosLifecyclesEnv = "STOWAGE_CHAOS_LIFECYCLES"
	ChaosPerNodeEnv    = "STOWAGE_CHAOS_PER_NODE"
	ChaosKillEveryEnv  = "STOWAGE_CHAOS_KILL_EVERY"
)

// ChaosScale sizes a chaos run at scale: Lifecycles volumes each provisioned, attached, staged, snapshotted and
// deleted, in waves of at most PerNode claims per node (and never more than a node's attach limit), while a
// random Stowage process is SIGKILLed every KillEvery.
type ChaosScale struct {
	Lifecycles int
	PerNode    int
	KillEvery  time.Duration
}

// Defaults of a run at scale. Eight claims per node keep a wave's mkfs and mounts within two busy cores. The
// kill interval is not scaled by ec2sim's time scale: only EC2's delays are scaled, while the Stowage
// processes run on real time (a sidecar's successor waits out a 15 s Lease), so a kill every 0.4 s (20 s at
// the tests' 0.02) would leave no process time to recover.
const (
	defaultChaosPerNode   = 8
	defaultChaosKillEvery = 20 * time.Second
)

// ChaosScaleFromEnv reads the size of a run at scale; Lifecycles 0 means the short form.
func ChaosScaleFromEnv(getenv func(string) string) (ChaosScale, error) {
	sc := ChaosScale{PerNode: defaultChaosPerNode, KillEvery: defaultChaosKillEvery}
	for _, v := range []struct {
		env string
		to  *int
	}{{ChaosLifecyclesEnv, &sc.Lifecycles}, {ChaosPerNodeEnv, &sc.PerNode}} {
		s := getenv(v.env)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || (n == 0 && v.to == &sc.PerNode) {
			return sc, fmt.Errorf("%s=%q: want a positive count", v.env, s)
		}
		*v.to = n
	}
	if s := getenv(ChaosKillEveryEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return sc, fmt.Errorf("%s=%q: want a positive duration such as 20s", ChaosKillEveryEnv, s)
		}
		sc.KillEvery = d
	}
	return sc, nil
}

// Waves splits n lifecycles into waves of at most size each, the last one possibly smaller.
func Waves(n, size int) []int {
	var out []int
	for n > 0 {
		w := min(n, size)
		out = append(out, w)
		n -= w
	}
	return out
}

// PlanEvery kills one of targets every interval from interval on, for as long as fits before until. The
// targets come in rounds, each a fresh random order drawn from rng, so every process is killed as often as
// the others (a draw with replacement can skip one for a whole run). The same rng state gives the same plan,
// so a seed replays a run.
func PlanEvery(rng *rand.Rand, every, until time.Duration, targets []string) []Kill {
	targets = slices.Sorted(slices.Values(targets)) // the caller's order must not change the draws
	var out []Kill
	var round []int
	for at := every; at < until; at += every {
		if len(round) == 0 {
			round = rng.Perm(len(targets))
		}
		out = append(out, Kill{At: at, Target: targets[round[0]]})
		round = round[1:]
	}
	return out
}

// faultKinds name the emulator's answer codes that are injected faults (the stack's emulator runs without
// rate limits, so every RequestLimitExceeded is injected).
var faultKinds = map[string]string{
	"RequestLimitExceeded":    "throttled (503)",
	"InternalError":           "5xx (500)",
	"Dropped":                 "dropped connection",
	"LostAnswerDropped":       "lost answer (connection closed)",
	"LostAnswerInternalError": "lost answer (500)",
}

// faultsByKind counts the calls the emulator answered (or dropped) and the faults it injected, by kind, from
// its answers by action and code (answerCounts), the mutating actions apart from the others.
func faultsByKind(answers map[string]map[string]int) (FaultCounts, map[string]FaultCounts) {
	var calls FaultCounts
	out := map[string]FaultCounts{}
	for action, codes := range answers {
		add := func(c *FaultCounts, n int) {
			if ec2sim.Mutating(action) {
				c.Mutating += n
			} else {
				c.Describe += n
			}
		}
		for code, n := range codes {
			add(&calls, n)
			if kind, ok := faultKinds[code]; ok {
				c := out[kind]
				add(&c, n)
				out[kind] = c
			}
		}
	}
	return calls, out
}
