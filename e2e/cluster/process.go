package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// errPortClash marks a start that failed because another process took a picked port first.
var errPortClash = errors.New("port already in use")

// logTailLines is how much of a child's log an error shows: enough to see why it failed.
const logTailLines = 40

// process is one control-plane child (see rig.Process). Its log is appended to, so a start retried after a
// port clash keeps the first attempt's log for diagnosis.
type process struct {
	*rig.Process
}

func startProcess(name, bin string, args []string, logDir string) (*process, error) {
	p, err := rig.Start(rig.Spec{Name: name, Path: bin, Args: args, LogDir: logDir, Append: true})
	if err != nil {
		return nil, err
	}
	return &process{p}, nil
}

// failure describes why the process is not usable, with the tail of its log.
func (p *process) failure(msg string, err error) error {
	tail := p.Tail(logTailLines)
	if strings.Contains(tail, "address already in use") {
		err = errors.Join(err, errPortClash)
	}
	return fmt.Errorf("%s %s: %w\n--- last lines of %s ---\n%s", p.Name, msg, err, p.LogPath, tail)
}

// waitReady polls ready until it succeeds, the process exits, ctx ends or timeout passes.
func (p *process) waitReady(ctx context.Context, timeout time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if done, err := p.Exited(); done {
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
		case <-p.Done():
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
