package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// errPortClash marks a start that failed because another process took a picked port first.
var errPortClash = errors.New("port already in use")

// logTailLines is how much of a child's log an error shows: enough to see why it failed.
const logTailLines = 40

// process is one control-plane child. It runs in its own process group, so stop reaches any helper it
// forks, and gets SIGKILL when the thread that started it dies (Pdeathsig), so a test binary killed
// with SIGKILL leaves no orphans either. Output goes to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
}

func startProcess(name, bin string, args []string, logDir string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	// Append: a start retried after a port clash keeps the first attempt's log for diagnosis.
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	fmt.Fprintf(logFile, "=== %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace, and waits for the process to end.
func (p *process) stop(grace time.Duration) {
	pgid := p.cmd.Process.Pid
	if done, _ := p.exited(); !done {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
		}
	}
	// The group may outlive its leader; SIGKILL whatever is left (ESRCH when nothing is).
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.done
}

// tail returns the last lines of the process's log.
func (p *process) tail(lines int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// failure describes why the process is not usable, with the tail of its log.
func (p *process) failure(msg string, err error) error {
	tail := p.tail(logTailLines)
	if strings.Contains(tail, "address already in use") {
		err = errors.Join(err, errPortClash)
	}
	return fmt.Errorf("%s %s: %w\n--- last lines of %s ---\n%s", p.name, msg, err, p.logPath, tail)
}

// waitReady polls ready until it succeeds, the process exits, ctx ends or timeout passes.
func (p *process) waitReady(ctx context.Context, timeout time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if done, err := p.exited(); done {
			return p.failure("exited during start", err)
		}
		reqCtx, reqCancel := context.WithTimeout(ctx, 5*time.Second)
		last = ready(reqCtx)
		reqCancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return p.failure(fmt.Sprintf("not ready after %s", timeout), errors.Join(ctx.Err(), last))
		case <-p.done:
		case <-tick.C:
		}
	}
}

// retryOnPortClash calls start with fresh free ports until it succeeds, fails for another reason, or
// has lost the race for its ports three times.
func retryOnPortClash(nPorts int, start func(ports []int) error) error {
	var err error
	for range 3 {
		var ports []int
		ports, err = freePorts(nPorts)
		if err != nil {
			return err
		}
		if err = start(ports); err == nil || !errors.Is(err, errPortClash) {
			return err
		}
	}
	return err
}
