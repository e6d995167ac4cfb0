package rig

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// StormRun is one phase of a storm benchmark for one sidecar: Objects objects handled in Seconds with Writes
// API writes (from the audit log).
type StormRun struct {
	Setting  string // the flags both sidecars ran with, e.g. "same flags (qps 20, burst 100)" or "own defaults"
	Phase    string // e.g. "attach", "detach"
	Sidecar  string // e.g. "upstream v4.13.0", "Stowage"
	Upstream bool   // the peer Stowage's row of the same setting and phase is compared with
	Objects  int
	Seconds  float64
	Writes   int
	// ServerWrites is every client's writes to the audited resources in the phase (the sidecar's, the
	// controller manager's, the benchmark's own), what the API server had to take; 0 when not counted.
	ServerWrites int
	// Kinds counts the sidecar's writes by "verb resource"; nil when not counted.
	Kinds map[string]int
	// Marks are moments of the phase, in seconds from its start, read from the audit log's timestamps (the
	// sidecar's last write of its work objects, another controller's last write): what the phase waited on
	// after the sidecar had done its part. Nil when not measured.
	Marks []StormMark
}

// StormMark is a named moment of a storm phase.
type StormMark struct {
	What    string
	Seconds float64
}

// LastWriteSeconds returns the seconds from start to the latest of writes that match, 0 if none.
func LastWriteSeconds(writes []AuditWrite, start time.Time, match func(AuditWrite) bool) float64 {
	var last time.Time
	for _, w := range writes {
		if match(w) && w.Time.After(last) {
			last = w.Time
		}
	}
	if last.IsZero() {
		return 0
	}
	return last.Sub(start).Seconds()
}

// CountKinds counts writes by "verb resource".
func CountKinds(writes []AuditWrite) map[string]int {
	kinds := map[string]int{}
	for _, w := range writes {
		kinds[w.Verb+" "+w.Resource]++
	}
	return kinds
}

// WritesPerObject is the API writes per object handled.
func (r StormRun) WritesPerObject() float64 {
	if r.Objects == 0 {
		return 0
	}
	return float64(r.Writes) / float64(r.Objects)
}

// WritesPerSecond is the sidecar's write rate over the phase.
func (r StormRun) WritesPerSecond() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Writes) / r.Seconds
}

// WriteStormTable prints runs as a table, with each run's write rate as a fraction of the server's limit and,
// on a Stowage row, its speed against the upstream row of the same setting and phase (upstream's seconds over
// Stowage's: 2.00x is twice as fast) and its writes per object over upstream's.
func WriteStormTable(w io.Writer, runs []StormRun, limit WriteLimit) {
	fmt.Fprintf(w, "%-44s %-9s %-18s %9s %14s %9s %10s %14s %15s %22s\n",
		"setting", "phase", "sidecar", "seconds", "writes/object", "writes/s", "% of limit", "speed vs up", "writes vs up", "all clients writes/s")
	for _, r := range runs {
		speed, writes := "", ""
		if up, ok := upstreamOf(runs, r); ok && !r.Upstream {
			if r.Seconds > 0 {
				speed = fmt.Sprintf("%.2fx", up.Seconds/r.Seconds)
			}
			if up.WritesPerObject() > 0 {
				writes = fmt.Sprintf("%.2fx", r.WritesPerObject()/up.WritesPerObject())
			}
		}
		server := ""
		if r.ServerWrites > 0 && r.Seconds > 0 {
			rate := float64(r.ServerWrites) / r.Seconds
			server = fmt.Sprintf("%.1f (%.1f%%)", rate, 100*limit.Fraction(rate))
		}
		fmt.Fprintf(w, "%-44s %-9s %-18s %9.1f %14.2f %9.1f %9.1f%% %14s %15s %22s\n",
			r.Setting, r.Phase, r.Sidecar, r.Seconds, r.WritesPerObject(), r.WritesPerSecond(), 100*limit.Fraction(r.WritesPerSecond()), speed, writes, server)
	}
}

// WriteStormKinds prints, for each run that counted them, the sidecar's writes per object by kind.
func WriteStormKinds(w io.Writer, runs []StormRun) {
	for _, r := range runs {
		if r.Kinds == nil || r.Objects == 0 {
			continue
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(r.Kinds)) {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(r.Kinds[k])/float64(r.Objects)))
		}
		fmt.Fprintf(w, "%s, %s, %s: %s\n", r.Setting, r.Phase, r.Sidecar, strings.Join(parts, ", "))
	}
}

// WriteStormMarks prints, for each run that has them, its marks and its length.
func WriteStormMarks(w io.Writer, runs []StormRun) {
	for _, r := range runs {
		if len(r.Marks) == 0 {
			continue
		}
		var parts []string
		for _, m := range r.Marks {
			parts = append(parts, fmt.Sprintf("%s at %.1f s", m.What, m.Seconds))
		}
		fmt.Fprintf(w, "%s, %s, %s: %s, of %.1f s\n", r.Setting, r.Phase, r.Sidecar, strings.Join(parts, ", "), r.Seconds)
	}
}

// upstreamOf finds the upstream run of r's setting and phase.
func upstreamOf(runs []StormRun, r StormRun) (StormRun, bool) {
	for _, u := range runs {
		if u.Upstream && u.Setting == r.Setting && u.Phase == r.Phase {
			return u, true
		}
	}
	return StormRun{}, false
}
