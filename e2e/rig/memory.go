package rig

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Memory is what the kernel reports in /proc/<pid>/status about a process's resident memory.
type Memory struct {
	RSS  int64 // VmRSS: resident now, in bytes
	Peak int64 // VmHWM: the highest VmRSS the process has had, in bytes
}

// MiB converts bytes to mebibytes for a table.
func MiB(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// ReadMemory reads VmRSS and VmHWM of pid.
func ReadMemory(pid int) (Memory, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Memory{}, fmt.Errorf("read memory of %d: %w", pid, err)
	}
	return parseMemory(string(data))
}

// parseMemory reads the VmRSS and VmHWM lines of a /proc/<pid>/status ("VmRSS:   12345 kB").
func parseMemory(status string) (Memory, error) {
	var m Memory
	found := 0
	for line := range strings.SplitSeq(status, "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			return Memory{}, fmt.Errorf("unexpected %s line %q", key, line)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("%s line %q: %w", key, line, err)
		}
		if key == "VmRSS" {
			m.RSS = kb << 10
		} else {
			m.Peak = kb << 10
		}
		found++
	}
	if found != 2 {
		return Memory{}, fmt.Errorf("status has no VmRSS and VmHWM lines (a kernel thread or a zombie?)")
	}
	return m, nil
}

// cpuTicks is the user plus system CPU time of pid, in clock ticks, from /proc/<pid>/stat.
func cpuTicks(pid int) (int64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read CPU time of %d: %w", pid, err)
	}
	return parseCPUTicks(string(data))
}

// parseCPUTicks sums utime and stime (fields 14 and 15) of a /proc/<pid>/stat line. The command name in
// field 2 may hold spaces and parentheses, so fields are counted after its closing parenthesis.
func parseCPUTicks(stat string) (int64, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("stat line %q has no command name", stat)
	}
	fields := strings.Fields(stat[end+1:])
	// fields[0] is field 3 (state), so utime (14) and stime (15) are fields[11] and fields[12].
	if len(fields) < 13 {
		return 0, fmt.Errorf("stat line %q is too short", stat)
	}
	var total int64
	for _, f := range fields[11:13] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat line %q: %w", stat, err)
		}
		total += v
	}
	return total, nil
}

// WaitIdle waits until pid used at most maxTicks clock ticks of CPU time (a tick is 10 ms on Linux) in
// each of two consecutive windows of the given length, so a memory reading after it is not one taken in
// the middle of work or of a garbage collection. It returns how long it waited.
func WaitIdle(ctx context.Context, pid int, window time.Duration, maxTicks int64) (time.Duration, error) {
	start := time.Now()
	last, err := cpuTicks(pid)
	if err != nil {
		return 0, err
	}
	quiet := 0
	for quiet < 2 {
		select {
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("process %d not idle: %w", pid, ctx.Err())
		case <-time.After(window):
		}
		now, err := cpuTicks(pid)
		if err != nil {
			return time.Since(start), err
		}
		if now-last <= maxTicks {
			quiet++
		} else {
			quiet = 0
		}
		last = now
	}
	return time.Since(start), nil
}

// MemoryRow is one line of a sidecar memory table: the process's memory with Objects objects in its caches,
// and how long it took from its start until its caches held them.
type MemoryRow struct {
	Sidecar string
	Objects int
	Memory
	Synced time.Duration
}

// WriteMemoryTable prints rows as a table. The growth columns compare a row with the previous row of the same
// sidecar with fewer objects (the empty baseline first): RSS and time to synced per 1,000 objects added. They
// are empty where there is no such row. The ratio columns compare a row with the upstream row (named by
// upstreamOf) with the same number of objects; empty for upstream's own rows and where none was measured.
func WriteMemoryTable(w io.Writer, rows []MemoryRow, upstreamOf func(sidecar string) string) {
	fmt.Fprintf(w, "%-24s %8s %8s %9s %9s %11s %14s %9s %11s\n",
		"sidecar", "objects", "RSS MiB", "peak MiB", "synced s", "MiB/1,000", "synced s/1,000", "RSS/up", "synced/up")
	for i, r := range rows {
		perMiB, perSync := "", ""
		if prev, ok := previousRow(rows[:i], r); ok {
			added := float64(r.Objects-prev.Objects) / 1000
			perMiB = fmt.Sprintf("%.2f", MiB(r.RSS-prev.RSS)/added)
			perSync = fmt.Sprintf("%.3f", (r.Synced-prev.Synced).Seconds()/added)
		}
		ratioRSS, ratioSync := "", ""
		if up, ok := findRow(rows, upstreamOf(r.Sidecar), r.Objects); ok && up.Sidecar != r.Sidecar {
			ratioRSS = fmt.Sprintf("%.2fx", float64(r.RSS)/float64(up.RSS))
			ratioSync = fmt.Sprintf("%.2fx", r.Synced.Seconds()/up.Synced.Seconds())
		}
		line := fmt.Sprintf("%-24s %8d %8.1f %9.1f %9.2f %11s %14s %9s %11s",
			r.Sidecar, r.Objects, MiB(r.RSS), MiB(r.Peak), r.Synced.Seconds(), perMiB, perSync, ratioRSS, ratioSync)
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
}

// previousRow is the row of r's sidecar with the most objects below r's.
func previousRow(rows []MemoryRow, r MemoryRow) (MemoryRow, bool) {
	var best MemoryRow
	found := false
	for _, p := range rows {
		if p.Sidecar == r.Sidecar && p.Objects < r.Objects && (!found || p.Objects > best.Objects) {
			best, found = p, true
		}
	}
	return best, found
}

// findRow is the row of sidecar with objects objects.
func findRow(rows []MemoryRow, sidecar string, objects int) (MemoryRow, bool) {
	for _, r := range rows {
		if r.Sidecar == sidecar && r.Objects == objects && r.Synced > 0 && r.RSS > 0 {
			return r, true
		}
	}
	return MemoryRow{}, false
}

// MemoryCounts is STOWAGE_MEMORY_N, the object counts of the memory benchmarks: a comma-separated list of
// increasing positive numbers (10000 when unset). A benchmark measures with none, then adds objects up to each
// count in turn and measures again, so one run shows how memory and time to synced grow.
func MemoryCounts(t testing.TB) []int {
	t.Helper()
	counts, err := parseCounts(os.Getenv("STOWAGE_MEMORY_N"))
	if err != nil {
		t.Fatalf("STOWAGE_MEMORY_N: %v", err)
	}
	return counts
}

// parseCounts reads a MemoryCounts list.
func parseCounts(s string) ([]int, error) {
	if s == "" {
		return []int{10000}, nil
	}
	var counts []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: %q is not a positive number", s, f)
		}
		if len(counts) > 0 && n <= counts[len(counts)-1] {
			return nil, fmt.Errorf("%q: counts must increase", s)
		}
		counts = append(counts, n)
	}
	return counts, nil
}

// MemoryRounds is STOWAGE_MEMORY_ROUNDS, how many fresh starts each memory figure is the median of (3).
func MemoryRounds(t testing.TB) int { return EnvCount(t, "STOWAGE_MEMORY_ROUNDS", 3) }

// loggedAt is the time in the klog header ("I1207 10:10:26.123456 ...", local time, no year) of the first
// line of log that holds s, in the year of near, the time the process started; false if no line holds s.
func loggedAt(log, s string, near time.Time) (time.Time, bool, error) {
	for line := range strings.SplitSeq(log, "\n") {
		if !strings.Contains(line, s) {
			continue
		}
		const layout = "0102 15:04:05.000000"
		if len(line) < 1+len(layout) {
			return time.Time{}, false, fmt.Errorf("line %q has no klog header", line)
		}
		at, err := time.ParseInLocation(layout, line[1:1+len(layout)], near.Location())
		if err != nil {
			return time.Time{}, false, fmt.Errorf("line %q has no klog header: %w", line, err)
		}
		at = time.Date(near.Year(), at.Month(), at.Day(), at.Hour(), at.Minute(), at.Second(), at.Nanosecond(), near.Location())
		// A process started on 31 December logs its January lines in the next year.
		if at.Before(near.Add(-24 * time.Hour)) {
			at = at.AddDate(1, 0, 0)
		}
		return at, true, nil
	}
	return time.Time{}, false, nil
}

// MedianMemory is the median RSS and the median peak of several readings (the upper middle one of an even
// number), each taken separately. Readings of a Go process vary with where its garbage collector happened
// to be, so a figure is the median of a few fresh starts.
func MedianMemory(readings []Memory) Memory {
	if len(readings) == 0 {
		return Memory{}
	}
	rss := make([]int64, len(readings))
	peak := make([]int64, len(readings))
	for i, m := range readings {
		rss[i], peak[i] = m.RSS, m.Peak
	}
	slices.Sort(rss)
	slices.Sort(peak)
	return Memory{RSS: rss[len(rss)/2], Peak: peak[len(peak)/2]}
}

// MemoryLegend explains the columns of WriteMemoryTable in one line, for under a table.
func MemoryLegend(rounds int) string {
	return fmt.Sprintf("RSS: VmRSS once idle after the initial LIST; peak: VmHWM; medians of %d fresh starts; "+
		"MiB and synced s per 1,000: growth over the row with fewer objects; x/up: Stowage over upstream at the same count", rounds)
}
