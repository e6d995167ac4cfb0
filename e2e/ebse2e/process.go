package ebse2e

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

// Process is one Stowage binary running as a child: its own process group, killed by the kernel if this
// process dies (Pdeathsig), its output in a log file.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// startProcess runs bin with args and exactly env (nothing inherited, so no credentials or AWS_CA_BUNDLE of
// the machine leak in), logging to logDir/<name>.log.
func startProcess(name, bin string, args, env []string, logDir string) (*Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited tells whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Pid is the process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM to the process group and SIGKILL after grace, and waits for the process to end.
func (p *Process) Stop(grace time.Duration) {
	if done, _ := p.Exited(); done {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Tail returns the last lines of the process's log.
func (p *Process) Tail(lines int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// buildBinaries builds the Stowage binaries the stack runs into dir, from the modules at the repository
// root. The Go build cache makes repeated builds cheap.
func buildBinaries(ctx context.Context, root, dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, b := range []struct{ module, name string }{
		{"ebs-plugin", "ebs-plugin"}, {"provisioner", "csi-provisioner"}, {"attacher", "csi-attacher"},
	} {
		bin := filepath.Join(dir, b.name)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin,
			"-ldflags", "-X github.com/stowage-csi/stowage/shared/version.Version=e2e", "./cmd/"+b.name)
		cmd.Dir = filepath.Join(root, b.module)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %w\n%s", b.name, err, msg)
		}
		out[b.name] = bin
	}
	return out, nil
}
