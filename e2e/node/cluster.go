package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/e2e/cluster"
	"github.com/stowage-csi/stowage/e2e/rig"
)

// Spec names one node of a cluster and its zone.
type Spec struct {
	Name, Zone string
	Labels     map[string]string
	// Taints the kubelet registers the node with, as key=value:Effect or key:Effect (--register-with-taints):
	// a CSI driver's startup taint, for example.
	Taints []string
}

// ClusterOptions describe a control plane with real nodes.
type ClusterOptions struct {
	Nodes []Spec
	// Images are image archives imported into every node (the pause image among them).
	Images []string
	// ControlPlane configures the control plane; its NodeAddress is set here, and the scheduler always runs.
	ControlPlane cluster.Options
}

// Cluster is a control plane, its Pod network, kube-proxy and its real nodes.
type Cluster struct {
	*cluster.Cluster
	Network *Network
	Proxy   *Proxy
	Nodes   []*Node
	unlock  func()
}

// clusterLock is held by the one cluster with real nodes this machine runs at a time: every cluster's
// kube-proxy programs the same host netfilter tables (and all give the kubernetes Service 10.96.0.1), so a
// second one would rewrite the first's rules, and its cleanup would remove them.
func clusterLock() string { return filepath.Join(os.TempDir(), "stowage-real-nodes.lock") }

// StartCluster starts the Pod network, the control plane reachable from it, kube-proxy, and the nodes (in
// parallel), and returns once every node is Ready. It waits while another process runs such a cluster. On error, everything it started is torn down.
func StartCluster(ctx context.Context, opts ClusterOptions) (_ *Cluster, err error) {
	if len(opts.Nodes) == 0 {
		return nil, errors.New("a cluster needs at least one node")
	}
	unlock, err := rig.LockFile(ctx, clusterLock())
	if err != nil {
		return nil, err
	}
	c := &Cluster{unlock: unlock}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop(context.WithoutCancel(ctx)))
		}
	}()
	if c.Network, err = NewNetwork(ctx); err != nil {
		return nil, err
	}
	cpOpts := opts.ControlPlane
	cpOpts.NodeAddress = c.Network.Gateway
	cpOpts.Scheduler = true
	if c.Cluster, err = cluster.Start(ctx, cpOpts); err != nil {
		return nil, err
	}
	if c.Proxy, err = StartProxy(ctx, c.Cluster, c.Network, opts.Nodes[0].Name); err != nil {
		return nil, err
	}
	c.Nodes = make([]*Node, len(opts.Nodes))
	errs := make([]error, len(opts.Nodes))
	var wg sync.WaitGroup
	for i, spec := range opts.Nodes {
		wg.Go(func() {
			c.Nodes[i], errs[i] = Start(ctx, Options{
				Name: spec.Name, Zone: spec.Zone, Labels: spec.Labels, Taints: spec.Taints, Index: i,
				Cluster: c.Cluster, Network: c.Network, Images: opts.Images,
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).Info("Cluster with real nodes ready", "nodes", len(c.Nodes), "server", c.RESTConfig().Host)
	return c, nil
}

// Stop tears down the nodes, kube-proxy (and its rules), the control plane and the Pod network. Safe to
// call more than once, and on a partly started cluster.
func (c *Cluster) Stop(ctx context.Context) error {
	var errs []error
	for _, n := range c.Nodes {
		if n != nil {
			errs = append(errs, n.Stop(ctx))
		}
	}
	if c.Proxy != nil {
		errs = append(errs, c.Proxy.Stop(ctx))
	}
	if c.Cluster != nil {
		errs = append(errs, c.Cluster.Stop())
	}
	if c.Network != nil {
		errs = append(errs, c.Network.Delete(ctx))
	}
	if c.unlock != nil {
		c.unlock()
		c.unlock = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tear down cluster: %w", err)
	}
	return nil
}

// NodeLogTail returns the last lines of every node's init, containerd and kubelet logs and kube-proxy's, for
// a failing test to print.
func (c *Cluster) NodeLogTail(lines int) string {
	var b strings.Builder
	for _, n := range c.Nodes {
		if n == nil || n.layout.logs == "" {
			continue
		}
		b.WriteString(n.logTails(lines))
	}
	if c.Proxy != nil && c.Proxy.LogPath() != "" {
		fmt.Fprintf(&b, "--- last lines of %s ---\n%s\n", c.Proxy.LogPath(), rig.TailFile(c.Proxy.LogPath(), lines))
	}
	return b.String()
}
