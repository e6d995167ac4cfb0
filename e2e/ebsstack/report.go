package ebsstack

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// StepResult is one finished step.
type StepResult struct {
	Scenario string
	Step     string
	Result   string
	Took     time.Duration
	Err      error
}

// Report runs steps, prints a line per step as it finishes (like "PVC data-0 Bound in 2.4s") and keeps
// them for the summary table.
type Report struct {
	out      io.Writer
	mu       sync.Mutex
	scenario string
	steps    []StepResult
}

// NewReport prints to out (io.Discard for silence).
func NewReport(out io.Writer) *Report { return &Report{out: out} }

// Scenario starts a new scenario heading.
func (r *Report) Scenario(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scenario = name
	fmt.Fprintf(r.out, "\n%s\n", name)
}

// Step runs fn; its result text becomes the line printed with the duration. A failing step prints its error
// and returns it wrapped with the step's name.
func (r *Report) Step(ctx context.Context, name string, fn func(ctx context.Context) (string, error)) error {
	start := time.Now()
	result, err := fn(ctx)
	took := time.Since(start)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, StepResult{Scenario: r.scenario, Step: name, Result: result, Took: took, Err: err})
	if err != nil {
		fmt.Fprintf(r.out, "  FAILED %s after %s: %v\n", name, FormatDuration(took), err)
		return fmt.Errorf("step %q: %w", name, err)
	}
	fmt.Fprintf(r.out, "  %s in %s\n", result, FormatDuration(took))
	return nil
}

// Steps returns the steps run so far.
func (r *Report) Steps() []StepResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]StepResult(nil), r.steps...)
}

// Summary writes the table of every step: scenario, step, status and duration, then the total.
func (r *Report) Summary(w io.Writer) {
	steps := r.Steps()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tSTEP\tSTATUS\tTOOK")
	var total time.Duration
	for _, s := range steps {
		status := "ok"
		if s.Err != nil {
			status = "FAILED"
		}
		total += s.Took
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", shortScenario(s.Scenario), s.Step, status, FormatDuration(s.Took))
	}
	fmt.Fprintf(tw, "\t%s\t\t%s\n", "total", FormatDuration(total))
	_ = tw.Flush()
}

// RecoverySummary writes the table of recovery times by component (the killed process's name): how many kills,
// how many were measured (followed by an operation, see Recovery), and the median and the longest time from a
// kill to its successor's first operation. Components are in name order.
func RecoverySummary(w io.Writer, recs []Recovery) {
	byTarget := map[string][]time.Duration{}
	kills := map[string]int{}
	for _, r := range recs {
		kills[r.Kill.Target]++
		if r.Measured {
			byTarget[r.Kill.Target] = append(byTarget[r.Kill.Target], r.Took)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tKILLS\tMEASURED\tMEDIAN\tMAX")
	for _, target := range slices.Sorted(maps.Keys(kills)) {
		took := byTarget[target]
		median, longest := "-", "-"
		if len(took) > 0 {
			median, longest = FormatDuration(Median(took)), FormatDuration(slices.Max(took))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", target, kills[target], len(took), median, longest)
	}
	_ = tw.Flush()
}

// Median is the middle of ds, or the mean of the two middle ones for an even count; 0 for none.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return (s[mid-1] + s[mid]) / 2
}

// shortScenario is a scenario's number ("1" of "1. Provision...") or, without one, its whole name.
func shortScenario(name string) string {
	if num, _, ok := strings.Cut(name, "."); ok && num != "" && strings.Trim(num, "0123456789") == "" {
		return num
	}
	return name
}

// FormatDuration prints 2.4s, 850ms or 1m12s.
func FormatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	default:
		return d.Round(time.Second).String()
	}
}

// ChaosTotals are the numbers of a chaos run: Lifecycles volumes taken from claim to deletion (Waves of them
// at a time, each volume snapshotted once in a run at scale), Calls the EC2 requests answered (or dropped) and
// Faults the emulator injected, by kind and by class (mutating or Describe), Slowed the calls of each action
// the Slow fault held, the SIGKILLs sent, the Seed that replays the run, and how long it Took, of which Setup
// was building and starting the stack.
type ChaosTotals struct {
	Lifecycles, Snapshots, Waves, Kills int
	Calls                               FaultCounts
	Faults                              map[string]FaultCounts
	Slowed                              map[string]int
	Seed                                uint64
	Took, Setup                         time.Duration
}

// FaultCounts count requests of the mutating actions and of the others (the Describe calls).
type FaultCounts struct{ Mutating, Describe int }

// ChaosTable writes the run's table (a one-number row ends in its value, which tabwriter leaves out of the
// column widths, so the two fault columns stay narrow): a line per number, the faults by kind (in name order) in a column per
// class, the slowed calls by action, the kills and how many of them were followed by a recovery (the
// killed process's successor did work, see Recovery) with the median and longest time to it; then the
// table of kills and recovery times by process (RecoverySummary).
func ChaosTable(w io.Writer, c ChaosTotals, recs []Recovery) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "seed\t%d\n", c.Seed)
	waves := "waves"
	if c.Waves == 1 {
		waves = "wave"
	}
	fmt.Fprintf(tw, "lifecycles\t%d (in %d %s)\n", c.Lifecycles, c.Waves, waves)
	fmt.Fprintf(tw, "snapshots\t%d\n", c.Snapshots)
	fmt.Fprintf(tw, "\tmutating\tDescribe\n")
	fmt.Fprintf(tw, "EC2 calls\t%d\t%d\n", c.Calls.Mutating, c.Calls.Describe)
	var total FaultCounts
	for _, kind := range slices.Sorted(maps.Keys(c.Faults)) {
		n := c.Faults[kind]
		fmt.Fprintf(tw, "fault: %s\t%d\t%d\n", kind, n.Mutating, n.Describe)
		total.Mutating += n.Mutating
		total.Describe += n.Describe
	}
	fmt.Fprintf(tw, "faults injected\t%d\t%d\n", total.Mutating, total.Describe)
	for _, action := range slices.Sorted(maps.Keys(c.Slowed)) {
		fmt.Fprintf(tw, "slowed %s\t%d\n", action, c.Slowed[action])
	}
	fmt.Fprintf(tw, "SIGKILLs\t%d\n", c.Kills)
	var took []time.Duration
	for _, r := range recs {
		if r.Measured {
			took = append(took, r.Took)
		}
	}
	if len(took) > 0 {
		fmt.Fprintf(tw, "recoveries\t%d (median %s, max %s)\n", len(took), FormatDuration(Median(took)), FormatDuration(slices.Max(took)))
	} else {
		fmt.Fprintf(tw, "recoveries\t0\n")
	}
	fmt.Fprintf(tw, "time\t%s (%s building and starting the stack)\n", FormatDuration(c.Took), FormatDuration(c.Setup))
	_ = tw.Flush()
	fmt.Fprintln(w)
	RecoverySummary(w, recs)
}
