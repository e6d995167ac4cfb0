// Package demo is `devcluster demo`: it installs the EBS driver's chart on real nodes on this machine
// (package ebsinstall; with --without, Stowage's binaries as processes, package ebsstack) at EC2's real time
// scale and walks volumes through their life with the same scenarios the end-to-end tests run, then installs
// the S3 driver's chart on a real node (package s3install): two Pods sharing one Mountpoint Pod, dynamic
// provisioning; the inline volume with pod-level credentials still runs on the S3 process stack (package
// s3stack). It prints a line per step and a summary table.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/e2e/ebsstack"
)

// Options configure Run.
type Options struct {
	// Keep leaves the stack running after the scenarios, with one volume in use, until ctx ends.
	Keep bool
	// Dir holds everything; empty means a temporary directory removed at the end.
	Dir string
	// TimeScale is the emulated EC2's; 1 is EC2's real delays.
	TimeScale float64
	// Without names sidecars the demo does not start (see ebsstack.Sidecars); it prints how to run yours.
	// The EBS part then runs on ebsstack's processes, which your sidecar joins, instead of real nodes.
	Without []string
	// Out gets the progress lines, the steps and the summary.
	Out io.Writer
}

// Run installs the EBS stack and runs its scenarios, tears it down, then installs the S3 chart on a real node
// for the S3 scenarios (and the S3 process stack for the inline volume one), and tears everything down; with
// Keep, the S3 scenarios run first and the EBS stack stays until ctx ends. The error names the failing step.
func Run(ctx context.Context, opts Options) (err error) {
	out := opts.Out
	if out == nil {
		out = os.Stdout
	}
	if opts.TimeScale == 0 {
		opts.TimeScale = 1
	}
	if err := prerequisites(ctx, out); err != nil {
		return err
	}
	logPath, logFile, restore, err := routeLogs(opts.Dir, out)
	if err != nil {
		return err
	}
	defer func() {
		restore()
		// A temporary log is only worth keeping when something failed.
		if err == nil && opts.Dir == "" {
			_ = os.Remove(logPath)
		}
	}()
	ctx = klog.NewContext(ctx, klog.Background())

	start := time.Now()
	fmt.Fprintf(out, "Stowage demo: the EBS and S3 CSI stacks on this machine (component logs: %s)\n", logPath)
	report := ebsstack.NewReport(out)
	// One cluster of real nodes runs on the machine at a time (a lock): the S3 install waits for the EBS
	// one's teardown, and with --keep, whose EBS stack stays, it goes first.
	s3First := opts.Keep
	var failed error
	if s3First {
		if failed = runS3(ctx, opts, out, start, report, logFile); failed != nil {
			fmt.Fprintln(out)
			report.Summary(out)
			fmt.Fprintf(out, "\nThe last lines of every component's log are in %s\n", logPath)
			return failed
		}
	}
	ebs, err := startEBS(ctx, opts, out, func(f string, a ...any) {
		fmt.Fprintf(out, "==> "+f+" [%s]\n", append(a, ebsstack.FormatDuration(time.Since(start)))...)
	})
	if err != nil {
		return fmt.Errorf("start the stack: %w", err)
	}
	ebsUp := true
	stopEBS := func() error {
		ebsUp = false
		fmt.Fprintln(out, "==> Tearing down: the chart and its Pods go, volumes are unmounted and detached, nodes and control plane stop")
		if err := ebs.stop(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("tear down: %w", err)
		}
		fmt.Fprintln(out, "==> Nothing of the EBS stack left running")
		return nil
	}
	defer func() {
		if ebsUp {
			err = errors.Join(err, stopEBS())
		}
	}()

	l, err := ebsstack.NewLifecycleOn(ebs.platform, report)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "==> Nodes: %s and %s in %s, %s in %s; EC2 delays at %gx real time\n",
		l.NodeA, l.NodeB, ebs.platform.Node(l.NodeA).Zone(), l.NodeC, ebs.platform.Node(l.NodeC).Zone(), opts.TimeScale)
	for _, scenario := range []func(context.Context) error{l.Provision, l.Move, l.FilesystemsAndBlock, l.SnapshotRestore, l.Delete, l.EphemeralVolumes, l.ExpandModify} {
		if failed = scenario(ctx); failed != nil {
			break
		}
	}
	if failed != nil {
		fmt.Fprintf(logFile, "\n%s", ebs.logTails(80))
	}
	if !s3First && failed == nil {
		if err := stopEBS(); err != nil {
			return err
		}
		failed = runS3(ctx, opts, out, start, report, logFile)
	}
	fmt.Fprintln(out)
	report.Summary(out)
	if failed != nil {
		fmt.Fprintf(out, "\nThe last lines of every component's log are in %s\n", logPath)
		return failed
	}
	if !opts.Keep {
		return nil
	}
	return keep(ctx, ebs, l, out)
}

// runS3 runs the S3 scenarios: the sharing and dynamic provisioning ones on a real node with the chart
// installed, then the inline volume one on the process stack. Each is torn down after its scenarios; when
// one failed, its components' last log lines go to logs first.
func runS3(ctx context.Context, opts Options, out io.Writer, start time.Time, report *ebsstack.Report, logs io.Writer) error {
	st, stop, err := startS3OnNodes(ctx, opts, out, start)
	if err != nil {
		return err
	}
	failed := s3Sharing(ctx, st, report)
	if failed == nil {
		failed = s3Dynamic(ctx, st, report)
	}
	if failed != nil {
		fmt.Fprintf(logs, "\n%s\n%s", st.Cluster.LogTail(80), st.Cluster.NodeLogTail(80))
	}
	if err := stop(); err != nil || failed != nil {
		return errors.Join(failed, err)
	}
	s, stopSTS, err := startS3STS(ctx, opts, out, start, "s3-sts-stack")
	if err != nil {
		return err
	}
	if failed = s3Inline(ctx, s, report); failed != nil {
		fmt.Fprintf(logs, "\n%s", s.LogTails(80))
	}
	return errors.Join(failed, stopSTS())
}

// keep leaves a volume in use on node A and waits for Ctrl-C.
func keep(ctx context.Context, ebs *ebsPart, l *ebsstack.Lifecycle, out io.Writer) error {
	if err := l.KeepInUse(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, `
The stack keeps running until Ctrl-C. In another shell:

  export KUBECONFIG=%s
  kubectl get nodes,csinodes,storageclasses
  kubectl get pv,pvc,volumeattachments,pods -o wide
  curl -s %s/debug/state    # the emulated EC2: volumes, attachments, loop devices

Component logs: %s
`, ebs.kubeconfig, ebs.ec2URL, ebs.logs)
	<-ctx.Done()
	fmt.Fprintln(out)
	return nil
}

// prerequisites checks for root and the tools the node plugin runs, installing the Debian packages that
// hold them when they are missing.
func prerequisites(ctx context.Context, out io.Writer) error {
	if os.Geteuid() != 0 {
		return errors.New("the demo needs root: it creates loop devices, formats and mounts them")
	}
	var missing []string
	// The tools ebs-plugin's node service runs, and the Debian packages holding them.
	pkgs := map[string]string{
		"mkfs.ext4": "e2fsprogs", "resize2fs": "e2fsprogs", "mkfs.xfs": "xfsprogs", "xfs_growfs": "xfsprogs",
		"blkid": "util-linux", "fsck": "util-linux", "blockdev": "util-linux", "lsblk": "util-linux",
		"mount": "mount", "umount": "mount", "losetup": "mount",
	}
	seen := map[string]bool{}
	for tool, pkg := range pkgs {
		if _, err := exec.LookPath(tool); err != nil && !seen[pkg] {
			missing, seen[pkg] = append(missing, pkg), true
		}
	}
	if len(missing) > 0 {
		if _, err := exec.LookPath("apt-get"); err != nil {
			return fmt.Errorf("missing tools; install the packages %s", strings.Join(missing, " "))
		}
		fmt.Fprintf(out, "==> Installing %s (apt-get)\n", strings.Join(missing, " "))
		for _, args := range [][]string{{"update", "-qq"}, append([]string{"install", "-y", "-qq", "--no-install-recommends"}, missing...)} {
			cmd := exec.CommandContext(ctx, "apt-get", args...)
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			if b, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, b)
			}
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		_ = exec.CommandContext(ctx, "modprobe", "loop").Run()
		if _, err := os.Stat("/dev/loop-control"); err != nil {
			return errors.New("no loop device support (/dev/loop-control); load the loop module")
		}
	}
	return nil
}

var msgField = regexp.MustCompile(`"msg"="((?:[^"\\]|\\.)*)"`)
var elapsedField = regexp.MustCompile(`"elapsed"="([^"]*)"`)

// routeLogs sends every klog line to a log file and echoes the control-plane build progress (the only
// long wait on a first run) to out. It returns the log's path, a writer appending to it, and a function
// restoring klog.
func routeLogs(dir string, out io.Writer) (string, io.Writer, func(), error) {
	logDir := os.TempDir()
	if dir != "" {
		logDir = filepath.Join(dir, "logs")
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			return "", nil, nil, err
		}
	}
	f, err := os.CreateTemp(logDir, "devcluster-demo-*.log")
	if err != nil {
		return "", nil, nil, err
	}
	var mu sync.Mutex
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(f, "%s %s %s\n", time.Now().Format(time.RFC3339Nano), prefix, args)
		if strings.Contains(args, "control-plane binaries") {
			if m := msgField.FindStringSubmatch(args); m != nil {
				line := m[1]
				if e := elapsedField.FindStringSubmatch(args); e != nil {
					line += " (" + e[1] + ")"
				}
				fmt.Fprintf(out, "    %s\n", line)
			}
		}
	}, funcr.Options{Verbosity: 2})
	klog.SetLogger(logger)
	return f.Name(), lockedWriter{&mu, f}, func() {
		klog.ClearLogger()
		mu.Lock()
		defer mu.Unlock()
		_ = f.Close()
	}, nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
