//go:build e2e

package ebsstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// drainingTaint is what `kubectl cordon`/drain leaves on a node (through the node lifecycle controller), and one
// of the taints upstream's pre-stop hook reads as "this node is going away".
const drainingTaint = "node.kubernetes.io/unschedulable"

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
	hook, err := startProcess("pre-stop-hook-"+node, filepath.Join(s.Dir, "bin", "ebs-plugin"),
		[]string{"pre-stop-hook", "--kubeconfig=" + s.Kubeconfigs["ebs-csi-node-sa"], "--v=2"},
		append(baseEnv(), "CSI_NODE_NAME="+node), s.logDir())
	if err != nil {
		return err
	}
	defer hook.Stop(stopGrace)
	log := func() string {
		data, _ := os.ReadFile(hook.LogPath)
		return string(data)
	}

	waiting := "Waiting for VolumeAttachments to be deleted"
	if err := poll(hookCtx, "the pre-stop hook waiting", func(context.Context) (bool, string, error) {
		if done, err := hook.Exited(); done {
			return false, "", fmt.Errorf("pre-stop hook exited (%v) while %s still had VolumeAttachments:\n%s", err, node, log())
		}
		return strings.Contains(log(), waiting), "", nil
	}); err != nil {
		return err
	}
	if err := detach(ctx); err != nil {
		return err
	}
	if err := hook.Wait(hookCtx); err != nil {
		return fmt.Errorf("pre-stop hook after %s's volumes were detached: %v\n%s", node, err, log())
	}
	return nil
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
	return s.waitTaint(ctx, node, drainingTaint, true)
}
