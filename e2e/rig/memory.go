package rig

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
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

// MemoryRow is one line of a sidecar memory table: the process's memory with Objects objects in its caches.
type MemoryRow struct {
	Sidecar string
	Objects int
	Memory
}

// WriteMemoryTable prints rows as a table. The per-1,000-objects column is the growth of RSS over the row of
// the same sidecar with 0 objects (the baseline), scaled to 1,000 objects; it is empty where there is no
// baseline or no objects.
func WriteMemoryTable(w io.Writer, rows []MemoryRow) {
	baseline := map[string]int64{}
	for _, r := range rows {
		if r.Objects == 0 {
			baseline[r.Sidecar] = r.RSS
		}
	}
	fmt.Fprintf(w, "%-16s %9s %9s %10s %22s\n", "sidecar", "objects", "RSS MiB", "peak MiB", "RSS MiB/1,000 objects")
	for _, r := range rows {
		per := ""
		if base, ok := baseline[r.Sidecar]; ok && r.Objects > 0 {
			per = fmt.Sprintf("%.2f", MiB(r.RSS-base)*1000/float64(r.Objects))
		}
		fmt.Fprintf(w, "%-16s %9d %9.1f %10.1f %22s\n", r.Sidecar, r.Objects, MiB(r.RSS), MiB(r.Peak), per)
	}
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
