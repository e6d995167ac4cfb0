package rig

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Spec describes a child process to start.
type Spec struct {
	Name   string   // names the log file, <LogDir>/<Name>.log
	Path   string   // the executable
	Args   []string // its arguments
	LogDir string
	// Env is the child's whole environment; nil inherits this process's. Harnesses pass an exact list so
	// the machine's credentials or AWS_CA_BUNDLE cannot leak into a child.
	Env []string
	// Append keeps an existing log and starts this run's part with a line naming the command, so a start
	// retried under the same name keeps the earlier attempt's output for diagnosis. Without it the log is
	// truncated.
	Append bool
}

// Process is a running child. It is the leader of its own process group, so Stop reaches any helper it
// forks, and the kernel sends it SIGKILL when the thread that started it dies (Pdeathsig), so a test binary
// killed with SIGKILL leaves no orphans either. Its output goes to a log file.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// Start starts the child described by spec.
func Start(spec Spec) (*Process, error) {
	logPath := filepath.Join(spec.LogDir, spec.Name+".log")
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if spec.Append {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	logFile, err := os.OpenFile(logPath, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", spec.Name, err)
	}
	if spec.Append {
		fmt.Fprintf(logFile, "=== %s %s\n", spec.Path, strings.Join(spec.Args, " "))
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = spec.Env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	p := &Process{Name: spec.Name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process ID (and the process group ID).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited tells whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Signal sends sig to the process group unless the process has already ended.
func (p *Process) Signal(sig syscall.Signal) {
	if done, _ := p.Exited(); !done {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// Wait waits for the process to end and returns how it ended, or ctx's error if ctx ends first.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.waitErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop sends SIGTERM to the process group, SIGKILL after grace, and waits for the process to end.
func (p *Process) Stop(grace time.Duration) {
	pgid := p.cmd.Process.Pid
	if done, _ := p.Exited(); !done {
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

// Tail returns the last lines of the process's log.
func (p *Process) Tail(lines int) string { return TailFile(p.LogPath, lines) }

// TailFile returns the last lines of the file at path, or a line saying why it cannot be read.
func TailFile(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// ProcessesWith lists this machine's processes whose command line holds s, each as "<pid>: <command line>",
// for a teardown check.
func ProcessesWith(s string) ([]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), s) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out, nil
}
