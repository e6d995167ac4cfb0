package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// Run says how to run e2e.test once.
type Run struct {
	E2ETest    string // the e2e.test binary (tools.E2ETest)
	Kubeconfig string // the cluster's admin kubeconfig
	// TestData holds the driver file and the files it names; e2e.test resolves the driver file's FromFile
	// names against it (its -repo-root).
	TestData   string
	DriverFile string // relative to TestData
	Focus      string // -ginkgo.focus
	Skip       string // -ginkgo.skip, e.g. SkipList.Regex
	// LabelFilter selects specs by their labels (-ginkgo.label-filter): the framework labels each spec it
	// names [Serial] or [Disruptive] with Serial or Disruptive.
	LabelFilter string
	// Ginkgo, if set, is Ginkgo's command line, which runs Procs processes of e2e.test that share the specs
	// out between them and merges their reports into one; without it e2e.test runs alone, one spec at a time.
	Ginkgo string
	Procs  int
	// ReportDir receives junit.xml and e2e.log (e2e.test's output).
	ReportDir string
	// Timeout is the whole suite's; e2e.test interrupts the running spec and reports it as failed.
	Timeout time.Duration
}

// JUnit is where the run writes its report.
func (r Run) JUnit() string { return filepath.Join(r.ReportDir, "junit.xml") }

// Log is where the run writes e2e.test's output.
func (r Run) Log() string { return filepath.Join(r.ReportDir, "e2e.log") }

// suiteArgs are e2e.test's own flags. The provider is the framework's default, skeleton: nothing here is a
// cloud the framework knows, and specs that need a provider's SSH or API skip themselves. No Pod needs to be
// Ready in kube-system beyond what Start waited for, and the framework's log dump gathers node logs over SSH,
// which this rig has not: e2e.log and the rig's own log tails serve instead.
func (r Run) suiteArgs() []string {
	return []string{
		"-kubeconfig=" + r.Kubeconfig,
		"-storage.testdriver=" + filepath.Join(r.TestData, r.DriverFile),
		"-repo-root=" + r.TestData,
		"-disable-log-dump",
	}
}

// ginkgoArgs are the flags that choose, time and report the specs. e2e.test takes them prefixed with
// "ginkgo."; Ginkgo's command line takes them bare and passes them on to every process.
func (r Run) ginkgoArgs(prefix string) []string {
	args := []string{
		prefix + "focus=" + r.Focus,
		prefix + "junit-report=" + r.JUnit(),
		prefix + "timeout=" + r.Timeout.String(),
		prefix + "no-color",
		prefix + "v",
	}
	if r.Skip != "" {
		args = append(args, prefix+"skip="+r.Skip)
	}
	if r.LabelFilter != "" {
		args = append(args, prefix+"label-filter="+r.LabelFilter)
	}
	return args
}

// Command is the program to run and its arguments: e2e.test itself, or Ginkgo's command line running it in
// Procs processes (`ginkgo run --procs=N e2e.test -- <e2e.test's flags>`, as Kubernetes' CI runs it).
func (r Run) Command() (string, []string) {
	if r.Ginkgo == "" {
		return r.E2ETest, append(r.suiteArgs(), r.ginkgoArgs("-ginkgo.")...)
	}
	args := append([]string{"run", fmt.Sprintf("--procs=%d", max(r.Procs, 1))}, r.ginkgoArgs("--")...)
	args = append(append(args, r.E2ETest, "--"), r.suiteArgs()...)
	return r.Ginkgo, args
}

// Execute runs e2e.test to its end, logging progress every minute. A non-zero exit is not an error when
// the report was written: the report says what failed. It returns the wall time.
func (r Run) Execute(ctx context.Context) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	if err := os.MkdirAll(r.ReportDir, 0o755); err != nil {
		return 0, err
	}
	_ = os.Remove(r.JUnit()) // a report left by an earlier run must never pass for this one's
	log, err := os.Create(r.Log())
	if err != nil {
		return 0, err
	}
	defer log.Close()
	name, args := r.Command()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	logger.Info("Running Kubernetes' External Storage suite", "focus", r.Focus, "labels", r.LabelFilter,
		"procs", max(r.Procs, 1), "log", r.Log())
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start e2e.test: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			wall := time.Since(start)
			if _, statErr := os.Stat(r.JUnit()); statErr != nil {
				return wall, fmt.Errorf("e2e.test wrote no report (%v): %v\n%s", statErr, err, rig.TailFile(r.Log(), 40))
			}
			logger.Info("External Storage suite ended", "exit", err, "took", wall.Round(time.Second))
			return wall, nil
		case <-tick.C:
			logger.Info("External Storage suite still running", "elapsed", time.Since(start).Round(time.Second), "log", r.Log())
		}
	}
}

// Label filters of the two passes of a full run. Specs the framework names [Serial] or [Disruptive] must have
// the cluster to themselves (they fill a node's attach slots, or stop its kubelet), so, as Kubernetes' CI
// does, they run after the others in a pass of their own with one process.
const (
	parallelLabels = "!Serial && !Disruptive"
	serialLabels   = "Serial || Disruptive"
)

// Passes splits r in two: every spec r selects that may share the cluster, in procs processes of Ginkgo's
// command line, then the [Serial] and [Disruptive] ones in e2e.test alone. Each pass writes its own report
// under r.ReportDir (parallel/, serial/); MergeResults joins them.
func (r Run) Passes(ginkgo string, procs int) []Run {
	parallel, serial := r, r
	parallel.Ginkgo, parallel.Procs, parallel.LabelFilter = ginkgo, procs, parallelLabels
	parallel.ReportDir = filepath.Join(r.ReportDir, "parallel")
	serial.Ginkgo, serial.Procs, serial.LabelFilter = "", 1, serialLabels
	serial.ReportDir = filepath.Join(r.ReportDir, "serial")
	return []Run{parallel, serial}
}
