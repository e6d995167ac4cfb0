package node

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/e2e/cluster"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/tools"
)

//go:embed init.sh
var initScript string

// stopGrace is how long the kubelet and containerd get to end after SIGTERM before the namespace is killed.
const stopGrace = 10 * time.Second

// readyTimeout bounds the wait for a new node to report Ready (15-20 s on a quiet machine).
const readyTimeout = 3 * time.Minute

// ZoneLabel is the well-known topology label each node carries.
const ZoneLabel = "topology.kubernetes.io/zone"

// Options describe one node.
type Options struct {
	Name    string
	Zone    string // the topology.kubernetes.io/zone label; empty sets none
	Index   int    // the node's number in the cluster: its Pods' address range in Network
	Cluster *cluster.Cluster
	Network *Network
	// Labels are added to the node's own labels (the kubelet registers them).
	Labels map[string]string
	// Taints the kubelet registers the node with (see Spec.Taints).
	Taints []string
	// Images are image archives (docker-archive tarballs) imported into the node's containerd before Start
	// returns. The pause image must be among them: there is no registry to pull it from.
	Images []string
}

// Node is a running node: containerd and the kubelet in their own namespaces.
type Node struct {
	Name   string
	layout layout
	proc   *rig.Process
	cg     *cgroupRoot
	ctr    string
	client kubernetes.Interface
}

// Start builds the node's binaries if the cache lacks them, starts containerd and the kubelet, imports the
// images and waits for the Node to be Ready. On error, everything it started is torn down.
func Start(ctx context.Context, opts Options) (_ *Node, err error) {
	logger := klog.FromContext(ctx).WithValues("node", opts.Name)
	bins, err := binaries(ctx)
	if err != nil {
		return nil, err
	}
	state, err := os.MkdirTemp("", "stowage-node-"+opts.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("create node dir: %w", err)
	}
	n := &Node{Name: opts.Name, layout: newLayout(state, filepath.Join(state, "logs")), ctr: bins.ctr,
		client: opts.Cluster.Client()}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Stop(context.WithoutCancel(ctx)))
		}
	}()
	if err := n.prepare(opts, bins); err != nil {
		return nil, err
	}
	if n.cg, err = newCgroupRoot(filepath.Base(state)); err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	kubeletCfg, err := kubeletConfig(n.layout, opts.Network.Gateway, kubeletPorts{port: ports[0], healthz: ports[1]},
		n.cg.path, filepath.Join(state, "ca.crt"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(state, "kubelet.yaml"), kubeletCfg, 0o644); err != nil {
		return nil, err
	}

	logger.Info("Starting node", "dir", state)
	if n.proc, err = n.start(opts, bins); err != nil {
		return nil, err
	}
	if err := n.waitSocket(ctx); err != nil {
		return nil, err
	}
	for _, archive := range opts.Images {
		if err := n.ImportImage(ctx, archive); err != nil {
			return nil, err
		}
	}
	if err := n.waitReady(ctx); err != nil {
		return nil, err
	}
	logger.Info("Node ready")
	return n, nil
}

// prepare writes the node's files: certificates, kubeconfig, containerd and CNI config, sysctl copies.
func (n *Node) prepare(opts Options, bins nodeBinaries) error {
	l := n.layout
	for _, d := range []string{l.logs, l.kubeletDir, l.cniConf, l.cniData} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	c := opts.Cluster
	if err := os.WriteFile(filepath.Join(l.state, "ca.crt"), c.CACert(), 0o644); err != nil {
		return err
	}
	// The Node authorizer and NodeRestriction know a kubelet by this identity.
	if err := c.WriteUserKubeconfig(filepath.Join(l.state, "kubelet.kubeconfig"), "system:node:"+opts.Name, "system:nodes"); err != nil {
		return err
	}
	if err := c.WriteServingCert(filepath.Join(l.state, "kubelet.crt"), filepath.Join(l.state, "kubelet.key"), opts.Name,
		opts.Network.Gateway, net.IPv4(127, 0, 0, 1)); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(l.state, "containerd.toml"),
		[]byte(containerdConfig(l, bins.runc, filepath.Dir(bins.bridge))), 0o644); err != nil {
		return err
	}
	cni, err := cniConfig(opts.Network, opts.Index, l.cniData)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(l.cniConf, "10-stowage.conflist"), cni, 0o644); err != nil {
		return err
	}
	return writeSysctlCopies(l.sysctls)
}

// start runs init.sh as PID 1 of a new PID and mount namespace. The host's / is a private mount here, and
// "unchanged" keeps it so: nothing the node mounts reaches the host. A PID namespace of its own also gives
// hostPID Pods (Kubernetes' e2e hostexec Pods nsenter into PID 1's mount namespace) a PID 1 that allows it,
// which this VM's own init refuses even to root.
func (n *Node) start(opts Options, bins nodeBinaries) (*rig.Process, error) {
	script := filepath.Join(n.layout.state, "init.sh")
	if err := os.WriteFile(script, []byte(initScript), 0o755); err != nil {
		return nil, err
	}
	labels := []string{}
	if opts.Zone != "" {
		labels = append(labels, ZoneLabel+"="+opts.Zone)
	}
	for k, v := range opts.Labels {
		labels = append(labels, k+"="+v)
	}
	kubeletArgs := []string{
		"--config=" + filepath.Join(n.layout.state, "kubelet.yaml"),
		"--kubeconfig=" + filepath.Join(n.layout.state, "kubelet.kubeconfig"),
		"--hostname-override=" + opts.Name,
		"--node-ip=" + opts.Network.Gateway.String(),
		"--root-dir=/var/lib/kubelet",
		"--v=2",
	}
	if len(labels) > 0 {
		kubeletArgs = append(kubeletArgs, "--node-labels="+strings.Join(labels, ","))
	}
	if len(opts.Taints) > 0 {
		kubeletArgs = append(kubeletArgs, "--register-with-taints="+strings.Join(opts.Taints, ","))
	}
	args := append([]string{"--pid", "--fork", "--mount", "--propagation", "unchanged", "--mount-proc", "/bin/sh", script},
		kubeletArgs...)
	path := strings.Join([]string{filepath.Dir(bins.containerd), "/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
		"/usr/bin", "/sbin", "/bin"}, ":")
	return rig.Start(rig.Spec{
		Name: "node", Path: "unshare", Args: args, LogDir: n.layout.logs,
		Env: []string{
			"PATH=" + path, "HOME=/root",
			"STATE=" + n.layout.state, "LOGS=" + n.layout.logs,
			"CONTAINERD=" + bins.containerd, "CONTAINERD_CONFIG=" + filepath.Join(n.layout.state, "containerd.toml"),
			"KUBELET=" + bins.kubelet,
		},
	})
}

// waitSocket waits for containerd's socket, or for the node's init to fail.
func (n *Node) waitSocket(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		if done, werr := n.proc.Exited(); done {
			return false, fmt.Errorf("node init ended: %v", werr)
		}
		_, err := os.Stat(n.layout.socket)
		return err == nil, nil
	})
	if err != nil {
		return n.failure("containerd did not start", err)
	}
	return nil
}

// waitReady waits for the Node object to report Ready.
func (n *Node) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if done, werr := n.proc.Exited(); done {
			return false, fmt.Errorf("node init ended: %v", werr)
		}
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, nil // the API server may be busy; the timeout bounds the wait
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return n.failure("did not become Ready", err)
	}
	return nil
}

// ImportImage imports a docker-archive tarball into the node's containerd, in the namespace the CRI uses.
func (n *Node) ImportImage(ctx context.Context, archive string) error {
	out, err := exec.CommandContext(ctx, n.ctr, "--address", n.layout.socket, "--namespace", "k8s.io",
		"images", "import", archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("import %s into node %s: %w: %s", archive, n.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// KillContainer sends SIGKILL to a container of the node's containerd, as an OOM kill or a crash would end
// it; the kubelet then restarts it as the Pod's restartPolicy says. id is the container's ID, with or without
// the "containerd://" of a Pod's containerStatuses.
func (n *Node) KillContainer(ctx context.Context, id string) error {
	id = strings.TrimPrefix(id, "containerd://")
	out, err := exec.CommandContext(ctx, n.ctr, "--address", n.layout.socket, "--namespace", "k8s.io",
		"tasks", "kill", "--signal", "SIGKILL", id).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kill container %s on node %s: %w: %s", id, n.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// failure describes why the node is not usable, with the tails of its logs.
func (n *Node) failure(msg string, err error) error {
	return fmt.Errorf("node %s %s: %w\n%s", n.Name, msg, err, n.logTails(30))
}

// logTails returns the last lines of the node's init, containerd and kubelet logs.
func (n *Node) logTails(lines int) string {
	var b strings.Builder
	for _, name := range []string{"node", "containerd", "kubelet"} {
		p := filepath.Join(n.layout.logs, name+".log")
		fmt.Fprintf(&b, "--- last lines of %s (%s) ---\n%s\n", p, n.Name, rig.TailFile(p, lines))
	}
	return b.String()
}

// LogDir is where the node's logs are (node, containerd, kubelet); it goes with Stop.
func (n *Node) LogDir() string { return n.layout.logs }

// Stop ends the node: SIGTERM to the kubelet and containerd, then SIGKILL to the namespace's PID 1, which
// ends every process in it (containers included) and with them its mounts and network namespaces. Then it
// removes the node's cgroups and state, and deletes the Node object so a later node of the same name starts
// clean. Safe to call more than once.
func (n *Node) Stop(ctx context.Context) error {
	var errs []error
	if n.proc != nil {
		n.proc.Stop(stopGrace)
		n.proc = nil
	}
	if n.cg != nil {
		if err := n.cg.remove(); err != nil {
			errs = append(errs, err)
		} else {
			n.cg = nil
		}
	}
	if n.layout.state != "" {
		if err := os.RemoveAll(n.layout.state); err != nil {
			errs = append(errs, fmt.Errorf("remove node dir: %w", err))
		} else {
			n.layout.state = ""
		}
	}
	if n.client != nil {
		err := n.client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).V(2).Info("Could not delete the Node object", "node", n.Name, "err", err)
		}
	}
	return errors.Join(errs...)
}

// nodeBinaries are the executables a node runs.
type nodeBinaries struct {
	kubelet, containerd, ctr, bridge, runc string
}

// binaries builds (or takes from the cache) the kubelet, containerd and the CNI plugins, and finds Debian's
// runc.
func binaries(ctx context.Context) (nodeBinaries, error) {
	var b nodeBinaries
	var err error
	if b.kubelet, err = tools.Binary(ctx, tools.Kubelet(), "kubelet"); err != nil {
		return b, err
	}
	if b.containerd, err = tools.Binary(ctx, tools.Containerd(), "containerd"); err != nil {
		return b, err
	}
	if b.ctr, err = tools.Binary(ctx, tools.Containerd(), "ctr"); err != nil {
		return b, err
	}
	if b.bridge, err = tools.Binary(ctx, tools.CNIPlugins(), "bridge"); err != nil {
		return b, err
	}
	if b.runc, err = exec.LookPath("runc"); err != nil {
		return b, fmt.Errorf("runc (Debian's package runc) is needed by the rig's nodes: %w", err)
	}
	return b, nil
}

// freePorts returns n TCP ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// StateDir is the node's directory on the host (certificates, configs, the kubelet's root, logs); Stop
// removes it.
func (n *Node) StateDir() string { return n.layout.state }

// Pid is the host PID of a process in the node's mount namespace (unshare, which made it), or 0 once the node
// stopped. The node's files as its kubelet and Pods see them, mounts of CSI volumes included, are readable from
// the host under /proc/<Pid>/root, and its mounts are listed in /proc/<Pid>/mountinfo: the host's own mount
// table never holds them.
func (n *Node) Pid() int {
	if n.proc == nil {
		return 0
	}
	return n.proc.Pid()
}

// CgroupRoot is the node's --cgroup-root, created in every cgroup v1 hierarchy; Stop removes it.
func (n *Node) CgroupRoot() string {
	if n.cg == nil {
		return ""
	}
	return n.cg.path
}
