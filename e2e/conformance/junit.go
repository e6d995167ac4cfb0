package conformance

import (
	"encoding/xml"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

// Status is a spec's outcome in the report.
type Status string

const (
	Passed  Status = "passed"
	Failed  Status = "failed"
	Skipped Status = "skipped"
	// NotRun is a spec the focus or -ginkgo.skip filtered out.
	NotRun Status = "not run"
)

// Result is one spec of the External Storage suite as the JUnit report gives it.
type Result struct {
	Name    string // the spec's full text, without Ginkgo's leaf-node prefix
	Pattern string // the test pattern, e.g. "Dynamic PV (default fs)"
	Suite   string // the test suite, e.g. "provisioning"
	Status  Status
	// Message is why it was skipped (Ginkgo's "skipped - <reason>", reason only) or the failure's text.
	Message string
	Time    time.Duration
}

// junitSuites is what Ginkgo's JUnit reporter writes: one suite with a test case per spec.
type junitSuites struct {
	Suites []struct {
		Cases []struct {
			Name    string  `xml:"name,attr"`
			Status  string  `xml:"status,attr"`
			Time    float64 `xml:"time,attr"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// externalStorage is how every spec of the External Storage suite starts; the report also lists the suite's
// setup nodes ([SynchronizedBeforeSuite], [ReportAfterSuite]) and, as skipped, every spec the focus left out.
const externalStorage = "External Storage [Driver: "

// patternRE finds the test pattern and the suite after it, past any tags between them ("[Slow]").
var patternRE = regexp.MustCompile(`\[Testpattern: ([^\]]+)\] (?:\[[^\]]*\] )*([^\s\[]+)`)

// ReadJUnit reads a report and returns its External Storage specs. A spec the focus or -ginkgo.skip filtered
// out is reported as skipped without a reason: NotRun. A setup node that failed is returned as a failed
// result, so a broken suite never reads as an empty pass.
func ReadJUnit(path string) ([]Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read JUnit report: %w", err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse JUnit report %s: %w", path, err)
	}
	var out []Result
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			name := c.Name
			if _, rest, ok := strings.Cut(name, "] "); ok && strings.HasPrefix(name, "[") {
				name = rest
			}
			r := Result{Name: name, Time: time.Duration(c.Time * float64(time.Second))}
			switch c.Status {
			case "passed":
				r.Status = Passed
			case "skipped", "pending":
				if c.Skipped == nil || !strings.HasPrefix(c.Skipped.Message, "skipped - ") {
					r.Status = NotRun
				} else {
					r.Status, r.Message = Skipped, strings.TrimPrefix(c.Skipped.Message, "skipped - ")
				}
			default: // failed, panicked, interrupted, aborted, timedout
				r.Status, r.Message = Failed, c.Status
				if c.Failure != nil {
					r.Message = firstLine(c.Failure.Message + "\n" + c.Failure.Text)
				} else if c.Error != nil {
					r.Message = firstLine(c.Error.Message + "\n" + c.Error.Text)
				}
			}
			if !strings.Contains(name, externalStorage) && r.Status != Failed {
				continue
			}
			if m := patternRE.FindStringSubmatch(name); m != nil {
				r.Pattern, r.Suite = m[1], m[2]
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// firstLine is the first non-empty line of s, for a table row.
func firstLine(s string) string {
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// MergeResults joins the reports of the passes of one run. Each report lists every spec of the suite, those
// its pass left out as NotRun, so a spec's result is the one from the pass that ran it; the order is the
// first report's.
func MergeResults(passes ...[]Result) []Result {
	var out []Result
	at := map[string]int{}
	for _, rs := range passes {
		for _, r := range rs {
			i, seen := at[r.Name]
			switch {
			case !seen:
				at[r.Name] = len(out)
				out = append(out, r)
			case out[i].Status == NotRun && r.Status != NotRun:
				out[i] = r
			case r.Status == Failed && out[i].Status != Failed:
				// A setup node ([SynchronizedBeforeSuite]) of each pass has the same name: a failure in
				// either must stay in the result.
				out[i] = r
			}
		}
	}
	return out
}
