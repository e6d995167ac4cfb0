package ebsstack

import (
	"context"
	"errors"
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
