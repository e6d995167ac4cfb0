package sidecarrig

import (
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// logTailLines is how much of a sidecar's log a failed test prints.
const logTailLines = 100

// Run is one start of a sidecar.
type Run struct {
	// Name names the process and its log.
	Name string
	// Path is the binary: Binary's (Stowage's) when empty, or Upstream's.
	Path string
	// Endpoint is the CSI driver's socket for --csi-address; empty for the snapshot-controller, which talks to
	// no driver.
	Endpoint string
	// Args follow the rig's own: --kubeconfig, --csi-address and --leader-election-namespace, which a Pod
	// would not need (in a Pod the Lease's namespace is the Pod's).
	Args []string
	// Env are variables of this run on top of the sidecar's Env (NODE_NAME of a node deployment).
	Env []string
}

// Start runs s as its ServiceAccount. It is killed when t ends, if it still runs, and its log is printed if t
// failed.
func (r *Rig) Start(t testing.TB, s Sidecar, run Run) *rig.Process {
	t.Helper()
	p, err := r.start(t, t, s, run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, p) })
	return p
}

// StartAfter is Start for a process that outlives the subtest starting it: it is killed when owner, a
// parent test, ends. It reports a failed start through t, not owner: only the test whose goroutine runs may
// stop.
func (r *Rig) StartAfter(t, owner testing.TB, s Sidecar, run Run) *rig.Process {
	t.Helper()
	p, err := r.start(t, owner, s, run)
	if err != nil {
		t.Error(err)
		return nil
	}
	owner.Cleanup(func() { stop(owner, p) })
	return p
}

// start starts s with its log in a folder of owner's.
func (r *Rig) start(t, owner testing.TB, s Sidecar, run Run) (*rig.Process, error) {
	path := run.Path
	if path == "" {
		path = Binary(t, s)
	}
	kubeconfig, ok := r.kubeconfigs[s.ServiceAccount]
	if !ok {
		return nil, fmt.Errorf("the rig was started without %s's RBAC", s.Command)
	}
	args := []string{"--kubeconfig=" + kubeconfig, "--leader-election-namespace=" + Namespace}
	if run.Endpoint != "" {
		args = append(args, "--csi-address="+run.Endpoint)
	}
	env := s.Env
	if run.Env != nil {
		if env == nil {
			env = os.Environ()
		}
		env = append(slices.Clone(env), run.Env...)
	}
	p, err := rig.Start(rig.Spec{Name: run.Name, Path: path, Args: append(args, run.Args...), LogDir: owner.TempDir(), Env: env})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Command, err)
	}
	return p, nil
}

// Kill sends p SIGKILL, as a crash or a node's loss would end it, and waits until it is gone.
func Kill(p *rig.Process) {
	p.Signal(syscall.SIGKILL)
	<-p.Done()
}

// stop kills p when its test ends and prints its log if the test failed.
func stop(t testing.TB, p *rig.Process) {
	Kill(p)
	if t.Failed() {
		t.Logf("%s (pid %d) log:\n%s", p.Name, p.Pid(), p.Tail(logTailLines))
	}
}
