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
	// ReportDir receives junit.xml and e2e.log (e2e.test's output).
	ReportDir string
	// Timeout is the whole suite's; e2e.test interrupts the running spec and reports it as failed.
	Timeout time.Duration
}

// JUnit is where the run writes its report.
func (r Run) JUnit() string { return filepath.Join(r.ReportDir, "junit.xml") }

// Log is where the run writes e2e.test's output.
func (r Run) Log() string { return filepath.Join(r.ReportDir, "e2e.log") }

// Args are e2e.test's flags. The provider is the framework's default, skeleton: nothing here is a cloud
// the framework knows, and specs that need a provider's SSH or API skip themselves. No Pod needs to be
// Ready in kube-system beyond what Start waited for, and the framework's log dump gathers node logs over
// SSH, which this rig has not: e2e.log and the rig's own log tails serve instead.
func (r Run) Args() []string {
	args := []string{
		"-kubeconfig=" + r.Kubeconfig,
		"-storage.testdriver=" + filepath.Join(r.TestData, r.DriverFile),
		"-repo-root=" + r.TestData,
		"-ginkgo.focus=" + r.Focus,
		"-ginkgo.junit-report=" + r.JUnit(),
		"-ginkgo.timeout=" + r.Timeout.String(),
		"-ginkgo.no-color",
		"-ginkgo.v",
		"-disable-log-dump",
	}
	if r.Skip != "" {
		args = append(args, "-ginkgo.skip="+r.Skip)
	}
	return args
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
	cmd := exec.CommandContext(ctx, r.E2ETest, r.Args()...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	logger.Info("Running Kubernetes' External Storage suite", "focus", r.Focus, "log", r.Log())
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
