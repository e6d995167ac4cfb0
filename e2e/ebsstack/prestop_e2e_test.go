//go:build e2e

package ebsstack

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// drainingTaint is what `kubectl cordon`/drain leaves on a node (through the node lifecycle controller), and one
// of the taints upstream's pre-stop hook reads as "this node is going away".
const drainingTaint = "node.kubernetes.io/unschedulable"

// lockedBuffer is a log the hook writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// withPreStopHook cordons node and starts `ebs-plugin pre-stop-hook` for it as the
// node plugin's preStop hook runs, under the node's ServiceAccount. It checks the hook is waiting for the
// node's VolumeAttachments, runs detach (which must take them all away), then checks the hook exits 0 on its
// own, and uncordons the node.
func withPreStopHook(ctx context.Context, s *Stack, node string, detach func(context.Context) error) error {
	if err := cordon(ctx, s, node, true); err != nil {
		return err
	}
	defer func() { _ = cordon(context.WithoutCancel(ctx), s, node, false) }()

	hookCtx, cancel := context.WithTimeout(ctx, StepTimeout)
	defer cancel()
	var log lockedBuffer
	cmd := exec.CommandContext(hookCtx, filepath.Join(s.Dir, "bin", "ebs-plugin"), "pre-stop-hook",
		"--kubeconfig="+s.Kubeconfigs["ebs-csi-node-sa"], "--v=2")
	cmd.Env = append(os.Environ(), "CSI_NODE_NAME="+node)
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	waiting := "Waiting for VolumeAttachments to be deleted"
	if err := poll(hookCtx, "the pre-stop hook waiting", func(context.Context) (bool, string, error) {
		select {
		case err := <-exited:
			return false, "", fmt.Errorf("pre-stop hook exited (%v) while %s still had VolumeAttachments:\n%s", err, node, log.String())
		default:
		}
		return strings.Contains(log.String(), waiting), "", nil
	}); err != nil {
		return err
	}
	if err := detach(ctx); err != nil {
		return err
	}
	select {
	case err := <-exited:
		if err != nil {
			return fmt.Errorf("pre-stop hook: %v\n%s", err, log.String())
		}
		return nil
	case <-hookCtx.Done():
		return fmt.Errorf("pre-stop hook still running after %s's volumes were detached:\n%s", node, log.String())
	}
}

// cordon sets or clears node's spec.unschedulable, as kubectl cordon and uncordon do; kube-controller-manager's
// node lifecycle controller then adds or removes drainingTaint, which is what the hook reads. With on, it waits
// for the taint.
func cordon(ctx context.Context, s *Stack, node string, on bool) error {
	n, err := s.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	n.Spec.Unschedulable = on
	if _, err := s.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil || !on {
		return err
	}
	return poll(ctx, "taint "+drainingTaint+" on "+node, func(ctx context.Context) (bool, string, error) {
		n, err := s.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == drainingTaint }), fmt.Sprint(n.Spec.Taints), nil
	})
}
