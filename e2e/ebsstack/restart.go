package ebsstack

import (
	"context"
	"fmt"
	"strings"
	"syscall"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// procSpec is how a process of the stack was started, so Restart can start it again the same way.
type procSpec struct {
	bin, logDir string
	args, env   []string
}

// Process returns the stack's current process of that name ("ebs-plugin-controller", "csi-provisioner",
// "csi-attacher", "ebs-plugin-<node>"), or nil.
func (s *Stack) Process(name string) *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.processLocked(name)
}

func (s *Stack) processLocked(name string) *Process {
	for _, p := range s.procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Kill sends SIGKILL to the named process (its whole process group), as an OOM kill or a node losing a
// container would, and waits until it has ended. Killing a process that has already ended is not an error.
func (s *Stack) Kill(ctx context.Context, name string) error {
	p := s.Process(name)
	if p == nil {
		return fmt.Errorf("no process %q in the stack", name)
	}
	p.Signal(syscall.SIGKILL)
	if err := p.Wait(ctx); ctx.Err() != nil {
		return fmt.Errorf("%s did not end after SIGKILL: %w", name, err)
	}
	return nil
}

// Restart starts the named process again with the command line and environment it was first started
// with, as a kubelet restarts a container that ended, and puts it in the stack in place of the ended one.
// Its log is appended to, after a line naming the command, so the earlier runs stay readable. A plugin
// (one with --endpoint) must answer Probe before Restart returns; a sidecar is only started.
func (s *Stack) Restart(ctx context.Context, name string) (*Process, error) {
	s.mu.Lock()
	old, spec, ok := s.processLocked(name), s.specs[name], s.specs[name].bin != ""
	s.mu.Unlock()
	if !ok || old == nil {
		return nil, fmt.Errorf("no process %q in the stack", name)
	}
	if done, _ := old.Exited(); !done {
		return nil, fmt.Errorf("%s (pid %d) is still running", name, old.Pid())
	}
	p, err := rig.Start(rig.Spec{Name: name, Path: spec.bin, Args: spec.args, Env: spec.env, LogDir: spec.logDir, Append: true})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	for i, q := range s.procs {
		if q == old {
			s.procs[i] = p
		}
	}
	switch {
	case s.Controller == old:
		s.Controller = p
	case s.Provisioner == old:
		s.Provisioner = p
	case s.Attacher == old:
		s.Attacher = p
	}
	for _, n := range s.Nodes {
		if n.Plugin == old {
			n.Plugin = p
		}
	}
	s.mu.Unlock()
	if sock := endpointSocket(spec.args); sock != "" {
		if err := waitProbe(ctx, sock, p); err != nil {
			return p, err
		}
	}
	return p, nil
}

// endpointSocket is the unix socket a plugin serves on (its --endpoint=unix://... flag), or "".
func endpointSocket(args []string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--endpoint=unix://"); ok {
			return v
		}
	}
	return ""
}
