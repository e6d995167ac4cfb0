package conformance

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// row is one line of the table: a test pattern and suite, or the total.
type row struct {
	pattern, suite          string
	passed, failed, skipped int
	listed                  int // of skipped: in the skip list
	time                    time.Duration
}

// WriteTable prints passed, failed and skipped per test pattern and suite, then the total and the run's
// wall time, then each failure and each listed skip with its reason. Specs that did not run and are not in
// the skip list (outside the focus) are not counted.
func WriteTable(w io.Writer, results []Result, v Verdict, wall time.Duration) error {
	listed := map[string]bool{}
	for _, r := range v.Listed {
		listed[r.Name] = true
	}
	rows := map[[2]string]*row{}
	total := row{pattern: "total"}
	for _, r := range results {
		if r.Status == NotRun && !listed[r.Name] {
			continue
		}
		k := [2]string{r.Pattern, r.Suite}
		if rows[k] == nil {
			rows[k] = &row{pattern: r.Pattern, suite: r.Suite}
		}
		for _, x := range []*row{rows[k], &total} {
			x.time += r.Time
			switch {
			case r.Status == Passed:
				x.passed++
			case r.Status == Failed:
				x.failed++
			default:
				x.skipped++
				if listed[r.Name] {
					x.listed++
				}
			}
		}
	}
	sorted := make([]*row, 0, len(rows))
	for _, r := range rows {
		sorted = append(sorted, r)
	}
	slices.SortFunc(sorted, func(a, b *row) int {
		return cmp.Or(cmp.Compare(a.pattern, b.pattern), cmp.Compare(a.suite, b.suite))
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "test pattern\tsuite\tpassed\tfailed\tskipped\tof which listed\ttime\t")
	for _, r := range append(sorted, &total) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t\n", r.pattern, r.suite, r.passed, r.failed, r.skipped, r.listed,
			r.time.Round(time.Second))
	}
	fmt.Fprintf(tw, "wall time\t\t\t\t\t\t%s\t\n", wall.Round(time.Second))
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range v.Failed {
		fmt.Fprintf(w, "FAILED  %s\n        %s\n", r.Name, r.Message)
	}
	for _, r := range v.Unexplained {
		fmt.Fprintf(w, "SKIPPED without a reason here  %s\n        %s\n", r.Name, r.Message)
	}
	return nil
}
