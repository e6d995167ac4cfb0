package rig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// FreeAddr returns a free 127.0.0.1 address ("127.0.0.1:port") for a sidecar's --http-endpoint.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Get fetches url and returns the status code and the body; it fails t when the request does.
func Get(t testing.TB, ctx context.Context, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer rsp.Body.Close()
	data, err := io.ReadAll(rsp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return rsp.StatusCode, string(data)
}

// MeasureSidecar starts a sidecar rounds times with start; each time it waits until the sidecar logged that
// its informer caches synced and the process is idle, reads its memory and stops it with SIGTERM (so it
// releases its lease for the next start). The row holds the median of the readings, and the median time from
// the start to that log line.
func MeasureSidecar(t testing.TB, ctx context.Context, sidecar string, objects, rounds int, start func(round int) *Process) MemoryRow {
	t.Helper()
	return measureSidecar(t, ctx, sidecar, "Caches synced", false, objects, rounds, start)
}

// MeasureUpstreamSidecar is MeasureSidecar for an upstream sidecar, the peer a Stowage one is compared with.
// It logs no "Caches synced": ready is the first log line it writes once its informers' caches synced. And
// where it installs no SIGTERM handler, the signal's default action ends it, which here is a normal stop.
func MeasureUpstreamSidecar(t testing.TB, ctx context.Context, sidecar, ready string, objects, rounds int, start func(round int) *Process) MemoryRow {
	t.Helper()
	return measureSidecar(t, ctx, sidecar, ready, true, objects, rounds, start)
}

// syncTimeout bounds the wait for a sidecar's initial LIST: minutes at 100,000 objects on a loaded machine.
const syncTimeout = 30 * time.Minute

func measureSidecar(t testing.TB, ctx context.Context, sidecar, ready string, termKills bool, objects, rounds int, start func(round int) *Process) MemoryRow {
	t.Helper()
	var readings []Memory
	var synced []time.Duration
	for round := range rounds {
		// Time to synced runs from just before the exec to the timestamp of the ready line in the process's
		// own log, so it does not depend on how often the log is polled.
		began := time.Now()
		p := start(round)
		var at time.Time
		Eventually(t, ctx, syncTimeout, fmt.Sprintf("%s with %d objects to sync its caches", sidecar, objects), func(context.Context) (bool, error) {
			log, err := os.ReadFile(p.LogPath)
			if err != nil {
				return false, err
			}
			var found bool
			at, found, err = loggedAt(string(log), ready, began)
			return found, err
		})
		waited, err := WaitIdle(ctx, p.Pid(), 3*time.Second, 3)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ReadMemory(p.Pid())
		if err != nil {
			t.Fatal(err)
		}
		// klog's header has microseconds and the start is read in nanoseconds: a line within the same
		// microsecond would come out a little before it.
		synced = append(synced, max(at.Sub(began), 0))
		t.Logf("%s with %d objects, start %d: synced after %.2f s, idle %.0f s later, RSS %.1f MiB, peak %.1f MiB",
			sidecar, objects, round+1, at.Sub(began).Seconds(), waited.Seconds(), MiB(m.RSS), MiB(m.Peak))
		readings = append(readings, m)
		if later := laterReading(t); later > 0 && objects > 0 && round == rounds-1 {
			// Whether the idle figure lasts: the Go runtime collects at least every 2 minutes, and what an
			// idle process allocates meanwhile (lease renewals, resyncs) may bring the RSS back up.
			time.Sleep(later)
			m, err := ReadMemory(p.Pid())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s with %d objects, start %d: %s later, still idle: RSS %.1f MiB, peak %.1f MiB", sidecar, objects, round+1, later, MiB(m.RSS), MiB(m.Peak))
		}
		p.Signal(syscall.SIGTERM)
		if err := p.Wait(ctx); err != nil && !(termKills && KilledBy(err, syscall.SIGTERM)) {
			t.Fatalf("%s exit after SIGTERM: %v", sidecar, err)
		}
	}
	slices.Sort(synced)
	return MemoryRow{Sidecar: sidecar, Objects: objects, Memory: MedianMemory(readings), Synced: synced[len(synced)/2]}
}

// KilledBy tells whether err, from Process.Wait, says the process was ended by sig.
func KilledBy(err error, sig syscall.Signal) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	status, ok := exit.Sys().(syscall.WaitStatus)
	return ok && status.Signaled() && status.Signal() == sig
}

// laterReading is MEMORY_RSS_LATER (a duration such as 150s): how long after its idle reading the last start
// of each memory figure with objects is read again; 0 (unset) reads no second time.
func laterReading(t testing.TB) time.Duration {
	v := os.Getenv("MEMORY_RSS_LATER")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("MEMORY_RSS_LATER=%q: %v", v, err)
	}
	return d
}
