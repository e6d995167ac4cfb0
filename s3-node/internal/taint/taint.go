// Package taint removes the startup taint s3.csi.aws.com/agent-not-ready from the node plugin's Node once
// the kubelet has registered the driver (its CSINode lists s3.csi.aws.com), so that no workload needing an
// S3 volume lands on a node whose plugin cannot serve it yet (upstream issue #107).
package taint

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/patch"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// DefaultBackoff is upstream's: from 0.5 s doubling, about ten minutes in all, then it gives up.
func DefaultBackoff() wait.Backoff {
	return wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: 11, Cap: 2 * time.Minute}
}

// Config is what Remove needs.
type Config struct {
	Client   kubernetes.Interface
	NodeName string
	// Backoff spaces the attempts; zero means DefaultBackoff.
	Backoff wait.Backoff
}

// Remove removes the taint once the CSINode lists the driver. A Node without the taint gets no write.
func Remove(ctx context.Context, c Config) error {
	backoff := c.Backoff
	if backoff.Duration <= 0 {
		backoff = DefaultBackoff()
	}
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		done, err := c.try(ctx)
		if err != nil {
			last = err
			klog.FromContext(ctx).V(2).Info("Startup taint not removed yet", "node", c.NodeName, "reason", err.Error())
		}
		return done, nil
	})
	if err != nil {
		return fmt.Errorf("removing taint %s from node %s: %w (last: %v)", s3api.TaintAgentNotReady, c.NodeName, err, last)
	}
	return nil
}

func (c Config) try(ctx context.Context) (bool, error) {
	node, err := c.Client.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("reading Node %s: %w", c.NodeName, err)
	}
	if !slices.ContainsFunc(node.Spec.Taints, isAgentNotReady) {
		return true, nil
	}
	csiNode, err := c.Client.StorageV1().CSINodes().Get(ctx, c.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, fmt.Errorf("CSINode %s does not exist yet", c.NodeName)
	} else if err != nil {
		return false, fmt.Errorf("reading CSINode %s: %w", c.NodeName, err)
	}
	if !slices.ContainsFunc(csiNode.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == s3api.DriverName }) {
		return false, fmt.Errorf("CSINode %s does not list driver %s yet", c.NodeName, s3api.DriverName)
	}
	// Preconditioned on the resourceVersion read: a taint changed meanwhile fails with Conflict and the
	// next attempt reads again, instead of being overwritten.
	if _, err := patch.Mutate(ctx, c.Client.CoreV1().Nodes().Patch, node, func(n *corev1.Node) {
		n.Spec.Taints = slices.DeleteFunc(slices.Clone(n.Spec.Taints), isAgentNotReady)
	}); err != nil {
		return false, fmt.Errorf("removing the taint from Node %s: %w", c.NodeName, err)
	}
	klog.FromContext(ctx).Info("Removed the startup taint: the driver is registered with the kubelet", "node", c.NodeName)
	return true, nil
}

func isAgentNotReady(t corev1.Taint) bool { return t.Key == s3api.TaintAgentNotReady }
