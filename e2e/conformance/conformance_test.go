package conformance

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func readSample(t *testing.T) []Result {
	t.Helper()
	rs, err := ReadJUnit(filepath.Join("testdata", "junit-sample.xml"))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestReadJUnitKeepsTheSuitesSpecs checks what the report reader keeps: External Storage specs only, their
// pattern and suite, the skip reason without Ginkgo's prefix, the failure's first line, and specs the focus
// left out as NotRun.
func TestReadJUnitKeepsTheSuitesSpecs(t *testing.T) {
	rs := readSample(t)
	if len(rs) != 6 {
		t.Fatalf("got %d results, want the 6 External Storage specs: %+v", len(rs), rs)
	}
	first := rs[0]
	if first.Status != Passed || first.Pattern != "Dynamic PV (default fs)" || first.Suite != "provisioning" ||
		first.Time != 30500*time.Millisecond || strings.HasPrefix(first.Name, "[It]") {
		t.Errorf("first result %+v", first)
	}
	if rs[1].Status != Failed || rs[1].Message != "[FAILED] Timed out after 60s waiting for the claim" {
		t.Errorf("failed result %+v", rs[1])
	}
	if rs[2].Status != Skipped || rs[2].Message != `Driver "ebs.csi.aws.com" does not support volume type "InlineVolume" - skipping` {
		t.Errorf("skipped result %+v", rs[2])
	}
	if rs[5].Status != NotRun || rs[5].Suite != "snapshottable" {
		t.Errorf("filtered-out result %+v", rs[5])
	}
}

// TestJudgeSortsSkips checks the rule of the run: a failure fails it, a framework skip passes, a listed skip
// passes and is reported with its reason, and any other skip fails it.
func TestJudgeSortsSkips(t *testing.T) {
	skips, err := ReadSkipList(filepath.Join("testdata", "skips.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	v := Judge(readSample(t), regexp.MustCompile("External.Storage"), skips)
	if len(v.Failed) != 1 || !strings.Contains(v.Failed[0].Name, "pvc data source") {
		t.Errorf("failed %+v", v.Failed)
	}
	if len(v.Listed) != 1 || !strings.Contains(v.Listed[0].Name, "kubelet restart") {
		t.Errorf("listed %+v", v.Listed)
	}
	if len(v.Unexplained) != 1 || !strings.Contains(v.Unexplained[0].Message, "Distro") {
		t.Errorf("unexplained %+v", v.Unexplained)
	}
	if err := v.Err(); err == nil || !strings.Contains(err.Error(), "pvc data source") || !strings.Contains(err.Error(), "neither") {
		t.Errorf("Err() = %v, want the failure and the unexplained skip", err)
	}
	if err := (Verdict{Listed: v.Listed}).Err(); err != nil {
		t.Errorf("listed skips alone: %v, want nil", err)
	}
}

func TestFrameworkSkip(t *testing.T) {
	for msg, want := range map[string]bool{
		`Driver "ebs.csi.aws.com" does not support volume type "InlineVolume" - skipping`: true,
		`Driver ebs.csi.aws.com doesn't support ntfs -- skipping`:                         true,
		`Driver "ebs.csi.aws.com" does not support FsGroup - skipping`:                    true,
		`Suite "volumeLimits" does not support Dynamic PV`:                                true,
		`Number of available nodes is less than 3 - skipping`:                             true,
		`Not enough topologies in cluster -- skipping`:                                    true,
		`this driver does not support multiple PVs with the same volumeHandle`:            true,
		`No SSH Key for provider skeleton: 'not implemented'`:                             false,
		`Distro debian doesn't support xfs -- skipping`:                                   false,
		`Only supported for providers [gce gke] (not skeleton)`:                           false,
	} {
		if got := FrameworkSkip(msg); got != want {
			t.Errorf("FrameworkSkip(%q) = %v, want %v", msg, got, want)
		}
	}
}

func TestReadSkipListRefusesAnEntryWithoutAReason(t *testing.T) {
	p := filepath.Join(t.TempDir(), "skips.yaml")
	writeFile(t, p, "- test: 'x'\n")
	if _, err := ReadSkipList(p); err == nil || !strings.Contains(err.Error(), "why") {
		t.Errorf("ReadSkipList = %v, want an error naming the missing why", err)
	}
	writeFile(t, p, "- test: '('\n  why: broken\n")
	if _, err := ReadSkipList(p); err == nil {
		t.Error("ReadSkipList accepted a broken expression")
	}
	writeFile(t, p, "- test: 'a'\n  why: x\n- test: 'b'\n  why: y\n  filter: true\n- test: 'c'\n  why: z\n  filter: true\n")
	l, err := ReadSkipList(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Regex(); got != "(b)|(c)" {
		t.Errorf("Regex() = %q, want only the filtered entries", got)
	}
}

// TestWriteTableCountsPerPatternAndSuite checks the table's rows and total; a spec outside the focus is not
// counted, a listed one is.
func TestWriteTableCountsPerPatternAndSuite(t *testing.T) {
	rs := readSample(t)
	skips, err := ReadSkipList(filepath.Join("testdata", "skips.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteTable(&b, rs, Judge(rs, regexp.MustCompile("External.Storage"), skips), 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^Dynamic PV \(default fs\)\s+provisioning\s+1\s+1\s+0\s+0\s+1m31s`),
		regexp.MustCompile(`(?m)^Dynamic PV \(default fs\)\s+disruptive\S*\s+0\s+0\s+1\s+1\s`),
		regexp.MustCompile(`(?m)^total\s+1\s+1\s+3\s+1\s`),
		regexp.MustCompile(`(?m)^wall time\s+3m0s`),
		regexp.MustCompile(`(?m)^FAILED  .*pvc data source`),
		regexp.MustCompile(`(?m)^SKIPPED without a reason here  .*block volmode`),
	} {
		if !want.MatchString(out) {
			t.Errorf("table lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "snapshottable") {
		t.Errorf("table counts a spec that did not run:\n%s", out)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
