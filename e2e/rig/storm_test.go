package rig

import (
	"strings"
	"testing"
	"time"
)

func TestWriteStormTableComparesWithTheUpstreamRowOfTheSameSettingAndPhase(t *testing.T) {
	runs := []StormRun{
		{Setting: "same flags", Phase: "attach", Sidecar: "upstream", Upstream: true, Objects: 100, Seconds: 30, Writes: 500},
		{Setting: "same flags", Phase: "attach", Sidecar: "Stowage", Objects: 100, Seconds: 10, Writes: 300},
		{Setting: "own defaults", Phase: "attach", Sidecar: "upstream", Upstream: true, Objects: 100, Seconds: 100, Writes: 500},
		{Setting: "own defaults", Phase: "attach", Sidecar: "Stowage", Objects: 100, Seconds: 4, Writes: 300},
		{Setting: "own defaults", Phase: "detach", Sidecar: "Stowage", Objects: 100, Seconds: 2, Writes: 200},
	}
	var b strings.Builder
	WriteStormTable(&b, runs, WriteLimit{Writes: 1000, Elapsed: time.Second})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines, want a header and 5 rows:\n%s", len(lines), b.String())
	}
	for i, want := range [][]string{
		1: {"5.00", "16.7", "1.7%"},           // upstream: 500 writes / 30 s of 1000/s; no ratio
		2: {"3.00", "30.0", "3.00x", "0.60x"}, // 30 s / 10 s; 3 / 5 writes
		4: {"75.0", "7.5%", "25.00x"},         // 100 s / 4 s
		5: {"2.00", "100.0", "10.0%"},         // no upstream detach row: no ratio
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("row %d %q lacks %q", i, lines[i], w)
			}
		}
	}
	if strings.Contains(lines[1], "x ") || strings.HasSuffix(strings.TrimSpace(lines[1]), "x") {
		t.Errorf("upstream row has a ratio: %q", lines[1])
	}
	if strings.Contains(lines[5], "x") {
		t.Errorf("row without an upstream peer has a ratio: %q", lines[5])
	}
}

func TestWriteStormKindsPerObject(t *testing.T) {
	kinds := CountKinds([]AuditWrite{
		{Verb: "create", Resource: "persistentvolumes"}, {Verb: "create", Resource: "persistentvolumes"},
		{Verb: "update", Resource: "leases"},
	})
	var b strings.Builder
	WriteStormKinds(&b, []StormRun{
		{Setting: "s", Phase: "provision", Sidecar: "Stowage", Objects: 2, Kinds: kinds},
		{Setting: "s", Phase: "delete", Sidecar: "Stowage", Objects: 2}, // not counted: no line
	})
	want := "s, provision, Stowage: create persistentvolumes 1.00, update leases 0.50\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestWriteStormTablePrintsAllClientsRate(t *testing.T) {
	var b strings.Builder
	WriteStormTable(&b, []StormRun{{Setting: "s", Phase: "p", Sidecar: "Stowage", Objects: 10, Seconds: 2, Writes: 20, ServerWrites: 500}},
		WriteLimit{Writes: 1000, Elapsed: time.Second})
	if !strings.Contains(b.String(), "250.0 (25.0%)") {
		t.Errorf("no all-clients rate of 250/s, 25%% of the limit:\n%s", b.String())
	}
}

func TestLastWriteSecondsIsTheLatestMatchingWrite(t *testing.T) {
	start := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	at := func(res string, s float64) AuditWrite {
		return AuditWrite{Resource: res, Time: start.Add(time.Duration(s * float64(time.Second)))}
	}
	writes := []AuditWrite{at("persistentvolumes", 1.5), at("persistentvolumes", 3.25), at("events", 9), at("persistentvolumes", 2)}
	work := func(w AuditWrite) bool { return w.Resource == "persistentvolumes" }
	if got := LastWriteSeconds(writes, start, work); got != 3.25 {
		t.Errorf("LastWriteSeconds = %v, want 3.25 (the latest PV write; the later Event does not match)", got)
	}
	if got := LastWriteSeconds(writes[2:3], start, work); got != 0 {
		t.Errorf("LastWriteSeconds with no matching write = %v, want 0", got)
	}
	var b strings.Builder
	WriteStormMarks(&b, []StormRun{
		{Setting: "s", Phase: "provision", Sidecar: "Stowage", Seconds: 4.3, Marks: []StormMark{{"last PV write", 1.2}, {"binder's last write", 4.25}}},
		{Setting: "s", Phase: "delete", Sidecar: "Stowage", Seconds: 3},
	})
	if want := "s, provision, Stowage: last PV write at 1.2 s, binder's last write at 4.2 s, of 4.3 s\n"; b.String() != want {
		t.Errorf("WriteStormMarks = %q, want %q", b.String(), want)
	}
}
