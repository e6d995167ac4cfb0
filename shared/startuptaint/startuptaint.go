// Package startuptaint removes a CSI node plugin's startup taint (`<driver>/agent-not-ready`) from its Node
// once the kubelet has registered the driver there.
//
// Clusters create nodes with that taint so that no pod needing the driver's volumes is scheduled on a node
// before its node plugin can serve it: the volume could not be staged or mounted, and the scheduler, not
// knowing the node's attach limit yet, may put more volumes on it than the node can hold. The plugin is ready
// once the kubelet has registered it: the node's CSINode lists the driver, and the kubelet writes the driver's
// attach limit into that same entry.
//
// Remove never gives up on its own: a node left tainted never gets a pod that needs the driver, and a slow
// registration (node-driver-registrar restarting, a busy kubelet or API server) must not need a restart of
// the plugin. It retries with a capped exponential backoff until the taint is gone or its context ends.
package startuptaint

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/stowage-csi/stowage/shared/patch"
)

// Default delays between attempts: upstream's first delay, doubling, then once a minute. Each attempt is one
// or two GETs, so a minute apart costs the API server nothing even on thousands of nodes.
const (
	DefaultInitialDelay = 500 * time.Millisecond
	DefaultMaxDelay     = time.Minute
)

// Config is what Remove needs.
type Config struct {
	Client   kubernetes.Interface
	NodeName string
	// Driver is the CSI driver name the Node's CSINode must list before the taint is removed.
	Driver string
	// TaintKey is the taint removed, whatever its effect; no other taint is touched.
	TaintKey string
	// RequireAllocatable waits, besides the driver's entry, for the attach limit the kubelet writes into it
	// (allocatable.count) from NodeGetInfo's max_volumes_per_node. A driver that reports a limit sets it: the
	// kubelet writes the entry first and the count in a later update, and a node untainted in between lets
	// the scheduler place volumes on it without a limit. Drivers without a limit leave it false: their
	// count never comes.
	RequireAllocatable bool
	// InitialDelay is the wait after the first failed attempt; it doubles after each one up to MaxDelay, then
	// stays there. Zero means DefaultInitialDelay, DefaultMaxDelay respectively.
	InitialDelay, MaxDelay time.Duration
	// Clock times the waits; nil is the real clock. Tests pass a fake one.
	Clock clock.Clock
}

// Remove removes c.TaintKey from the Node once its CSINode lists c.Driver, retrying until that is done or ctx
// ends, when it returns ctx's cause with the last reason. A Node without the taint gets no write.
func Remove(ctx context.Context, c Config) error {
	logger := klog.FromContext(ctx).WithValues("node", c.NodeName, "taint", c.TaintKey)
	ctx = klog.NewContext(ctx, logger)
	clk := c.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	b := newBackoff(c.InitialDelay, c.MaxDelay)
	warned := false
	for {
		done, err := c.try(ctx)
		if done {
			return nil
		}
		delay, capped := b.next()
		if capped && !warned {
			// Said once at the default level, so that a node that stays tainted says why; the retries
			// after it only at V(2).
			warned = true
			logger.Info("Startup taint still not removed; retrying until it is", "reason", err.Error(), "every", delay)
		} else {
			logger.V(2).Info("Startup taint not removed yet; retrying", "reason", err.Error(), "in", delay)
		}
		t := clk.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("removing taint %s from node %s: %w (last: %w)", c.TaintKey, c.NodeName, context.Cause(ctx), err)
		case <-t.C():
		}
	}
}

// try makes one attempt. It returns done when the Node has no such taint (any more), or else why not yet.
func (c Config) try(ctx context.Context) (done bool, err error) {
	node, err := c.Client.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("reading Node %s: %w", c.NodeName, err)
	}
	if !slices.ContainsFunc(node.Spec.Taints, c.isStartupTaint) {
		klog.FromContext(ctx).V(2).Info("Node has no startup taint")
		return true, nil
	}
	if err := c.registered(ctx); err != nil {
		return false, err
	}
	// A merge patch preconditioned on the resourceVersion read above: a taint added or changed meanwhile
	// makes it fail with Conflict instead of being overwritten, and the next attempt reads again.
	if _, err := patch.Mutate(ctx, c.Client.CoreV1().Nodes().Patch, node, func(n *corev1.Node) {
		n.Spec.Taints = slices.DeleteFunc(slices.Clone(n.Spec.Taints), c.isStartupTaint)
	}); err != nil {
		return false, fmt.Errorf("removing the taint from Node %s: %w", c.NodeName, err)
	}
	klog.FromContext(ctx).Info("Removed the startup taint: the driver is registered with the kubelet")
	return true, nil
}

// registered returns nil when the Node's CSINode lists the driver (with its allocatable count when
// RequireAllocatable), or else why not.
func (c Config) registered(ctx context.Context) error {
	csiNode, err := c.Client.StorageV1().CSINodes().Get(ctx, c.NodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("CSINode %s does not exist yet", c.NodeName)
	case err != nil:
		return fmt.Errorf("reading CSINode %s: %w", c.NodeName, err)
	}
	for _, d := range csiNode.Spec.Drivers {
		if d.Name != c.Driver {
			continue
		}
		if c.RequireAllocatable && (d.Allocatable == nil || d.Allocatable.Count == nil) {
			return fmt.Errorf("CSINode %s lists driver %s without its allocatable count yet", c.NodeName, c.Driver)
		}
		return nil
	}
	return fmt.Errorf("CSINode %s does not list driver %s yet", c.NodeName, c.Driver)
}

func (c Config) isStartupTaint(t corev1.Taint) bool { return t.Key == c.TaintKey }

// backoff is the delay between attempts: doubling from initial up to max, then max for ever.
type backoff struct {
	delay, max time.Duration
}

func newBackoff(initial, maxDelay time.Duration) *backoff {
	if initial <= 0 {
		initial = DefaultInitialDelay
	}
	if maxDelay <= 0 {
		maxDelay = DefaultMaxDelay
	}
	return &backoff{delay: min(initial, maxDelay), max: maxDelay}
}

// next returns the delay to wait now, and whether it has reached the cap.
func (b *backoff) next() (time.Duration, bool) {
	d := b.delay
	b.delay = min(2*b.delay, b.max)
	return d, d == b.max
}
