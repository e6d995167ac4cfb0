package ebsstack

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		850 * time.Millisecond:  "850ms",
		2400 * time.Millisecond: "2.4s",
		72 * time.Second:        "1m12s",
		120 * time.Second:       "2m0s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestReportPrintsStepsAndNamesTheFailure(t *testing.T) {
	var out strings.Builder
	r := NewReport(&out)
	r.Scenario("1. Provision")
	if err := r.Step(context.Background(), "bind", func(context.Context) (string, error) { return "PVC data-0 Bound", nil }); err != nil {
		t.Fatal(err)
	}
	err := r.Step(context.Background(), "attach", func(context.Context) (string, error) { return "", errors.New("timed out") })
	if err == nil || !strings.Contains(err.Error(), `step "attach"`) || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("failing step error = %v", err)
	}
	var table strings.Builder
	r.Summary(&table)
	for _, want := range []string{"1. Provision\n", "  PVC data-0 Bound in ", "  FAILED attach after "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "1 ") || !strings.Contains(lines[1], "ok") || !strings.Contains(lines[2], "FAILED") || !strings.Contains(lines[3], "total") {
		t.Errorf("summary:\n%s", table.String())
	}
}

func TestMedian(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want time.Duration
	}{
		{"none", nil, 0},
		{"one", []time.Duration{3 * s}, 3 * s},
		{"odd count, unsorted", []time.Duration{9 * s, 1 * s, 4 * s}, 4 * s},
		{"even count: mean of the middle two", []time.Duration{4 * s, 1 * s, 10 * s, 2 * s}, 3 * s},
	} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("%s: Median(%v) = %s, want %s", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestRecoverySummaryMedianAndMaxPerComponent(t *testing.T) {
	kill := func(target string) KillRecord { return KillRecord{Target: target} }
	recs := []Recovery{
		{Kill: kill("csi-provisioner"), Took: 16 * time.Second, Measured: true},
		{Kill: kill("ebs-plugin-controller"), Took: 300 * time.Millisecond, Measured: true},
		{Kill: kill("csi-provisioner"), Took: 14 * time.Second, Measured: true},
		{Kill: kill("ebs-plugin-controller"), Took: 1500 * time.Millisecond, Measured: true},
		{Kill: kill("ebs-plugin-controller"), Took: 700 * time.Millisecond, Measured: true},
		{Kill: kill("csi-attacher")}, // no work came after it
		{Kill: kill("csi-provisioner")},
	}
	var out strings.Builder
	RecoverySummary(&out, recs)
	want := [][]string{
		{"COMPONENT", "KILLS", "MEASURED", "MEDIAN", "MAX"},
		{"csi-attacher", "1", "0", "-", "-"},
		{"csi-provisioner", "3", "2", "15.0s", "16.0s"},
		{"ebs-plugin-controller", "3", "3", "700ms", "1.5s"},
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("table has %d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, line := range lines {
		if got := strings.Fields(line); !slices.Equal(got, want[i]) {
			t.Errorf("line %d = %q, want %q", i, got, want[i])
		}
	}
}

func TestChaosTableListsTheRunsNumbersAndRecoveries(t *testing.T) {
	var out strings.Builder
	kill := KillRecord{Target: "csi-attacher", Pid: 1}
	ChaosTable(&out, ChaosTotals{Lifecycles: 40, Snapshots: 40, Waves: 2, Kills: 2, Seed: 7, Took: 90 * time.Second, Setup: 30 * time.Second,
		Calls:  FaultCounts{Mutating: 400, Describe: 900},
		Faults: map[string]FaultCounts{"throttled": {Mutating: 30, Describe: 80}, "lost answer": {Mutating: 2}},
		Slowed: map[string]int{"AttachVolume": 12}},
		[]Recovery{{Kill: kill, Took: 16 * time.Second, Op: "Attached", Measured: true}, {Kill: kill}})
	// Column widths follow the longest name; compare the cells.
	var lines []string
	for line := range strings.SplitSeq(out.String(), "\n") {
		lines = append(lines, strings.Join(strings.Fields(line), " "))
	}
	for _, want := range []string{"seed 7", "lifecycles 40 (in 2 waves)", "snapshots 40", "mutating Describe", "EC2 calls 400 900",
		"fault: lost answer 2 0", "fault: throttled 30 80", "faults injected 32 80", "slowed AttachVolume 12", "SIGKILLs 2",
		"recoveries 1 (median 16.0s, max 16.0s)", "time 1m30s (30.0s building and starting the stack)", "csi-attacher 2 1 16.0s 16.0s"} {
		if !slices.Contains(lines, want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
