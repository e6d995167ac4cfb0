//go:build e2e

package conformance

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/ebsinstall"
	"github.com/stowage-csi/stowage/e2e/images"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/tools"
)

// modeEnv selects the run: unset, the short form `make test` runs; "full", the whole External Storage focus
// `make conformance` runs, [Serial] included.
const modeEnv = "STOWAGE_CONFORMANCE"

// focusEnv narrows a full run to the specs whose names also match it (a regular expression).
const focusEnv = "STOWAGE_CONFORMANCE_FOCUS"

// procsEnv is how many e2e.test processes a full run's parallel pass runs (default defaultProcs).
const procsEnv = "STOWAGE_CONFORMANCE_PROCS"

// defaultProcs for a full run on this machine's 2 cores: each process spends most of its time waiting for
// the cluster (Pods starting, volumes attaching, ec2sim's delays), not on a core.
const defaultProcs = 3

// teardownTime is what a run keeps of go test's -timeout for the install's teardown after the suite.
const teardownTime = 10 * time.Minute

// fullFocus is every spec of the suite for the driver.
const fullFocus = `External.Storage.*\[Driver: ebs\.csi\.aws\.com\]`

// shortFocus is a fixed handful of specs, one or two per area, that fit `make test`: provisioning with a
// mount option, data kept on ext4, xfs and a block volume, snapshot and restore, online expansion (of xfs:
// ext4's needs a capability this machine withholds, see testdata/skips.yaml), and provisioning in the zone a
// class allows.
var shortFocus = fullFocus + `.*(` + strings.Join([]string{
	`\[Testpattern: Dynamic PV \(default fs\)\] provisioning should provision storage with mount options`,
	`\[Testpattern: Dynamic PV \(ext4\)\] volumes should store data`,
	`\[Testpattern: Dynamic PV \(xfs\)\] \[Slow\] volumes should store data`,
	`\[Testpattern: Dynamic PV \(block volmode\)\] volumes should store data`,
	`\[Testpattern: Dynamic Snapshot \(delete policy\)\] snapshottable \[Feature:VolumeSnapshotDataSource\] volume snapshot controller should check snapshot fields, check restore correctly works after modifying source data, check deletion \(persistent\)`,
	`\[Testpattern: Dynamic PV \(xfs\)\] \[Slow\] volume-expand should resize volume when PVC is edited while pod is using it`,
	`\[Testpattern: Dynamic PV \(delayed binding\)\] topology should provision a volume and schedule a pod with AllowedTopologies`,
}, "|") + `)`

// TestE2EConformance runs Kubernetes' External Storage suite (e2e.test at the rig's pin) against the
// stowage-ebs chart on two real nodes in two zones, ec2sim as EC2, with testdata/ebs-testdriver.yaml. It
// prints the table of passed, failed and skipped specs per test pattern and suite, keeps the JUnit report
// and e2e.test's log under $STOWAGE_CACHE_DIR/conformance/<mode>, and fails on any failed spec and on any
// skip that is neither the framework's own nor in testdata/skips.yaml. Then, on the same install, it checks
// what the suite's expansion specs leave out: that an expanded filesystem really grew (checkFilesystemGrows).
// The full form runs in two passes (Run.Passes); with SidecarsEnv=upstream the chart's sidecar slots and the
// snapshot-controller run upstream's images instead of Stowage's (mode full-upstream).
func TestE2EConformance(t *testing.T) {
	ctx := context.Background()
	mode, focus, timeout := "short", shortFocus, 25*time.Minute
	if os.Getenv(modeEnv) == "full" {
		mode, focus, timeout = "full", fullFocus, 6*time.Hour
		// A part of the full focus, to run again the specs a full run failed while they are being fixed.
		if part := os.Getenv(focusEnv); part != "" {
			focus += ".*(" + part + ")"
		}
	}
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	skips, err := ReadSkipList(filepath.Join("testdata", "skips.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e2eTest, err := tools.Binary(ctx, tools.E2ETest(), "e2e.test")
	if err != nil {
		t.Fatal(err)
	}
	agnhostBin, err := tools.Binary(ctx, tools.Agnhost(), "agnhost")
	if err != nil {
		t.Fatal(err)
	}
	agnhost, err := images.Agnhost(ctx, tools.CacheDir(root), agnhostBin)
	if err != nil {
		t.Fatal(err)
	}
	testData, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}

	ginkgo := ""
	if mode == "full" {
		// Built before the nodes start, which hold the machine's real-node lock.
		if ginkgo, err = tools.Binary(ctx, tools.Ginkgo(), "ginkgo"); err != nil {
			t.Fatal(err)
		}
	}

	opts := ebsinstall.Options{ExtraImages: []string{agnhost.Path}}
	switch sidecars := os.Getenv(SidecarsEnv); sidecars {
	case "":
	case "upstream":
		up, err := images.Upstream(ctx, tools.CacheDir(root))
		if err != nil {
			t.Fatal(err)
		}
		sw, err := NewUpstreamSwap(up)
		if err != nil {
			t.Fatal(err)
		}
		opts.Values, opts.SnapshotController = sw.Values, sw.SnapshotController
		opts.ExtraImages = append(opts.ExtraImages, sw.Archives...)
		mode += "-upstream"
	default:
		t.Fatalf("%s=%q: want unset (Stowage's sidecars) or upstream", SidecarsEnv, sidecars)
	}

	s := ebsinstall.ForTest(t, opts)
	run := Run{
		E2ETest: e2eTest, Kubeconfig: s.Cluster.Kubeconfig(), TestData: testData, DriverFile: "ebs-testdriver.yaml",
		Focus: focus, Skip: skips.Regex(), ReportDir: filepath.Join(tools.CacheDir(root), "conformance", mode),
		Timeout: timeout,
	}
	passes := []Run{run}
	if ginkgo != "" {
		passes = run.Passes(ginkgo, rig.EnvCount(t, procsEnv, defaultProcs))
	}
	var (
		wall    time.Duration
		reports [][]Result
	)
	for _, p := range passes {
		// In a full run, Ginkgo's own timeout, not go test's, ends a pass that runs out of time: it interrupts
		// the running specs, runs their cleanup and writes the report, and the install's teardown still has
		// time after it. The short form keeps its own timeout: in `make test` it may have waited long for the
		// real-node lock, and a few minutes of suite must not be cut for a teardown reserve.
		if dl, ok := t.Deadline(); ok && ginkgo != "" {
			p.Timeout = min(p.Timeout, time.Until(dl)-teardownTime)
		}
		if p.Timeout < time.Minute {
			t.Errorf("pass %q not run: go test's -timeout leaves no time for it", p.LabelFilter)
			continue
		}
		took, err := p.Execute(ctx)
		wall += took
		if err != nil {
			t.Fatal(err)
		}
		rs, err := ReadJUnit(p.JUnit())
		if err != nil {
			t.Fatal(err)
		}
		reports = append(reports, rs)
		t.Logf("pass %q (procs=%d) took %s", p.LabelFilter, max(p.Procs, 1), took.Round(time.Second))
	}
	results := MergeResults(reports...)
	v := Judge(results, regexp.MustCompile(focus), skips)
	var table strings.Builder
	if err := WriteTable(&table, results, v, wall); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run.ReportDir, "table.txt"), []byte(table.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("External Storage suite, %s form (reports and logs under %s):\n%s", mode, run.ReportDir, table.String())
	if !hasPassed(results) {
		t.Errorf("no spec passed: the focus %q selected nothing that ran", focus)
	}
	if err := v.Err(); err != nil {
		t.Errorf("%v\n(e2e.test's logs: %s)", err, run.ReportDir)
	}
	t.Run("FilesystemGrowsOnline", func(t *testing.T) { checkFilesystemGrows(t, ctx, s.Cluster.Client()) })
}

func hasPassed(rs []Result) bool {
	for _, r := range rs {
		if r.Status == Passed {
			return true
		}
	}
	return false
}
