package ebsstack

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/e2e/cluster"
	"github.com/stowage-csi/stowage/e2e/ec2sim"
	"github.com/stowage-csi/stowage/e2e/kubeletsim"
	"github.com/stowage-csi/stowage/e2e/rig"
)

const (
	// Driver is the EBS CSI driver's name.
	Driver = "ebs.csi.aws.com"
	// Region is the emulated region; its zones are a, b and c.
	Region = "us-east-1"
	// ClusterID tags every volume the controller creates (ebs.csi.aws.com/cluster=true plus this ID).
	ClusterID = "stowage-e2e"
	// AgentNotReadyTaint is the startup taint upstream's install guide puts on nodes; the node plugin removes
	// it once the kubelet has registered the driver, so no Pod that needs EBS lands before it can be served.
	AgentNotReadyTaint = "ebs.csi.aws.com/agent-not-ready"

	rbacNamespace = "kube-system"
	stopGrace     = 10 * time.Second
)

// NodeSpec is one simulated node and the EC2 instance it is.
type NodeSpec struct {
	Name, Zone, InstanceID, InstanceType string
}

// DefaultNodes are node-a and node-b in us-east-1a (so a volume can move between them) and node-c in
// us-east-1b (two zones).
func DefaultNodes() []NodeSpec {
	return []NodeSpec{
		{Name: "node-a", Zone: "us-east-1a", InstanceID: "i-0a000000000000001", InstanceType: "m5.large"},
		{Name: "node-b", Zone: "us-east-1a", InstanceID: "i-0b000000000000002", InstanceType: "m5.large"},
		{Name: "node-c", Zone: "us-east-1b", InstanceID: "i-0c000000000000003", InstanceType: "m5.large"},
	}
}

// Options configure Start.
type Options struct {
	// TimeScale is ec2sim's: 1.0 is EC2's real delays, 0.02 suits tests.
	TimeScale float64
	// Dir holds everything (binaries, logs, control plane, EC2 data, kubelet roots, sockets). Empty means a
	// new temporary directory, removed by Stop.
	Dir string
	// Nodes default to DefaultNodes.
	Nodes []NodeSpec
	// Progress, if set, gets one line per start-up stage.
	Progress func(format string, args ...any)
	// Without names sidecars not to start ("csi-provisioner", "csi-attacher"), so one built elsewhere can
	// take their place; SidecarArgs and SidecarEnv give how to run it.
	Without []string
	// UpstreamArgs runs every container with exactly the args and env of the stowage-ebs chart's default
	// render (upstream's manifests' args; args.go, e2e/rendered), plus only what a process outside a Pod needs
	// to reach the cluster and the emulator (a kubeconfig, the lease namespace, the sockets, the device link
	// folder). Otherwise also args.go's few test-only settings: the sidecars retry faster than the chart
	// allows, which the chaos run needs to converge in minutes.
	UpstreamArgs bool
	// With names further sidecars to start beside csi-provisioner and csi-attacher, from Extras. Each runs
	// under its own ServiceAccount (its name) with the RBAC of deploy/rbac/<name>.yaml; the snapshot CRDs
	// are installed first when a snapshot binary is named.
	With []string
	// UnionRBAC runs the controller Pod's sidecars under one ServiceAccount holding all their roles
	// (UnionAccount), as aws-ebs-csi-driver's manifests bind them, instead of one account per sidecar.
	UnionRBAC bool
}

// Sidecars are the binaries Options.Without can leave out.
var Sidecars = []string{"csi-provisioner", "csi-attacher"}

// Extras are the sidecars Options.With can add, each with the module it is built from.
var Extras = map[string]string{"csi-resizer": "resizer", "csi-snapshotter": "snapshotter", "snapshot-controller": "snapshotter"}

// Node is one simulated node: its ebs-plugin node process and its kubelet simulator.
type Node struct {
	Spec    NodeSpec
	Plugin  *Process
	Kubelet *kubeletsim.Node
}

// Stack is the whole EBS storage stack on this machine: the control plane, the EC2 emulator, ebs-plugin in
// controller mode with csi-provisioner and csi-attacher, and one ebs-plugin node process plus kubeletsim
// per node. Every Stowage binary is its own process under its own ServiceAccount (RBAC from deploy/rbac).
type Stack struct {
	Dir     string
	Cluster *cluster.Cluster
	Client  kubernetes.Interface
	EC2     *ec2sim.Server
	Nodes   map[string]*Node
	// NodeOrder lists the node names in the order given.
	NodeOrder []string

	Controller, Provisioner, Attacher *Process
	// ControllerSocket is ebs-plugin controller's CSI socket, which the sidecars use.
	ControllerSocket string
	// Kubeconfigs are the ServiceAccount kubeconfigs by ServiceAccount name (csi-provisioner,
	// csi-attacher, ebs-csi-node-sa); with UnionRBAC, the controller Pod's sidecars' names map to
	// UnionAccount's.
	Kubeconfigs map[string]string

	removeDir bool
	// upstreamArgs is Options.UpstreamArgs.
	upstreamArgs bool
	// with is Options.With.
	with []string
	// unionRBAC is Options.UnionRBAC.
	unionRBAC bool
	linkDir   string
	// mu guards procs, specs and the process fields above, which Restart replaces (restart.go).
	mu    sync.Mutex
	procs []*Process
	specs map[string]procSpec
}

// Start builds the Stowage binaries, starts everything and returns when every node is registered. On error
// everything started so far is stopped again.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	progress := opts.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	if opts.TimeScale == 0 {
		opts.TimeScale = 1
	}
	if len(opts.Nodes) == 0 {
		opts.Nodes = DefaultNodes()
	}
	without := map[string]bool{}
	for _, w := range opts.Without {
		if !slices.Contains(Sidecars, w) {
			return nil, fmt.Errorf("cannot leave out %q: only %v", w, Sidecars)
		}
		without[w] = true
	}
	for _, w := range opts.With {
		if _, ok := Extras[w]; !ok {
			return nil, fmt.Errorf("cannot add %q: only %v", w, slices.Sorted(maps.Keys(Extras)))
		}
	}
	root, err := rig.WorkingRepoRoot()
	if err != nil {
		return nil, err
	}
	dir, removeDir, err := rig.Workdir(opts.Dir, "stowage-ebs-")
	if err != nil {
		return nil, err
	}
	s := &Stack{Dir: dir, removeDir: removeDir, Nodes: map[string]*Node{}, upstreamArgs: opts.UpstreamArgs, with: opts.With, unionRBAC: opts.UnionRBAC}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Stop())
		}
	}()

	progress("Building ebs-plugin, csi-provisioner and csi-attacher%s", andAlso(opts.With))
	bins, err := buildBinaries(ctx, root, filepath.Join(s.Dir, "bin"), opts.With)
	if err != nil {
		return nil, err
	}
	progress("Starting etcd, kube-apiserver and kube-controller-manager (a first run builds them from source: about 4 minutes per Kubernetes binary)")
	if err := s.startControlPlane(ctx, root); err != nil {
		return nil, err
	}
	progress("Starting the EC2 emulator (time scale %g) with instances %s", opts.TimeScale, instanceList(opts.Nodes))
	if err := s.startEC2(ctx, opts.Nodes, opts.TimeScale); err != nil {
		return nil, err
	}
	progress("Starting ebs-plugin (controller), csi-provisioner and csi-attacher")
	if err := s.startController(ctx, bins, without); err != nil {
		return nil, err
	}
	if len(opts.With) > 0 {
		progress("Starting %v", opts.With)
		if err := s.startExtras(ctx, bins, opts.With); err != nil {
			return nil, err
		}
	}
	for _, spec := range opts.Nodes {
		progress("Starting ebs-plugin (node) and kubeletsim for %s (%s, %s)", spec.Name, spec.Zone, spec.InstanceID)
		if err := s.startNode(ctx, spec, bins["ebs-plugin"]); err != nil {
			return nil, err
		}
	}
	progress("Stack ready: kubeconfig %s", s.Cluster.Kubeconfig())
	return s, nil
}

func (s *Stack) logDir() string { return filepath.Join(s.Dir, "logs") }

// andAlso lists the extra sidecars for a progress line ("" when there are none).
func andAlso(with []string) string {
	if len(with) == 0 {
		return ""
	}
	return ", and " + strings.Join(with, ", ")
}

// startControlPlane starts the control plane and applies the binaries' RBAC and the CSIDriver.
func (s *Stack) startControlPlane(ctx context.Context, root string) error {
	var err error
	// kube-scheduler places the Pods created without a node (generic ephemeral volumes need its volume
	// binder); the other scenarios bind their Pods themselves.
	if s.Cluster, err = cluster.Start(ctx, cluster.Options{Dir: filepath.Join(s.Dir, "cluster"), Scheduler: true}); err != nil {
		return err
	}
	cfg := s.Cluster.RESTConfig()
	cfg.QPS, cfg.Burst = 200, 400
	if s.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if s.Kubeconfigs, err = s.applyRBAC(ctx, root); err != nil {
		return err
	}
	return s.createCSIDriver(ctx, root)
}

// startEC2 starts the emulator with one local instance per node.
func (s *Stack) startEC2(ctx context.Context, nodes []NodeSpec, timeScale float64) error {
	s.linkDir = filepath.Join(s.Dir, "dev", "disk", "by-id")
	instances := make([]ec2sim.Instance, 0, len(nodes))
	for _, n := range nodes {
		instances = append(instances, ec2sim.Instance{ID: n.InstanceID, Zone: n.Zone, Type: n.InstanceType, Local: true})
	}
	var err error
	s.EC2, err = ec2sim.Start(ctx, ec2sim.Config{
		DataDir: filepath.Join(s.Dir, "ec2"), Region: Region, Zones: []string{Region + "a", Region + "b", Region + "c"},
		Instances: instances, DeviceLinkDir: s.linkDir, TimeScale: timeScale, Logger: klog.FromContext(ctx),
	})
	return err
}

// startController starts ebs-plugin in controller mode, waits until it answers Probe, and starts the
// sidecars not left out.
func (s *Stack) startController(ctx context.Context, bins map[string]string, without map[string]bool) error {
	s.ControllerSocket = filepath.Join(s.Dir, "sock", "controller.sock")
	args, env, err := s.controllerProcess()
	if err != nil {
		return err
	}
	if s.Controller, err = s.start("ebs-plugin-controller", bins["ebs-plugin"], args, env); err != nil {
		return err
	}
	if err := waitProbe(ctx, s.ControllerSocket, s.Controller); err != nil {
		return err
	}
	if !without["csi-provisioner"] {
		if s.Provisioner, err = s.startSidecar(ctx, "csi-provisioner", bins["csi-provisioner"]); err != nil {
			return err
		}
	}
	if !without["csi-attacher"] {
		if s.Attacher, err = s.startSidecar(ctx, "csi-attacher", bins["csi-attacher"]); err != nil {
			return err
		}
	}
	return nil
}

// startExtras starts the sidecars of Options.With, after the snapshot CRDs if a snapshot binary is among
// them (both watch snapshot objects from their first moment).
func (s *Stack) startExtras(ctx context.Context, bins map[string]string, with []string) error {
	if slices.ContainsFunc(with, func(w string) bool { return Extras[w] == "snapshotter" }) {
		if err := s.Cluster.InstallSnapshotCRDs(ctx); err != nil {
			return err
		}
	}
	for _, w := range with {
		if _, err := s.startSidecar(ctx, w, bins[w]); err != nil {
			return err
		}
	}
	return nil
}

// Sidecar is the current process of a sidecar the stack started (one of Sidecars or of Options.With), or
// nil.
func (s *Stack) Sidecar(name string) *Process { return s.Process(name) }

// startNode starts the node's ebs-plugin (its own socket and instance metadata), waits until it answers
// Probe, and starts its kubelet simulator, which registers the node.
func (s *Stack) startNode(ctx context.Context, spec NodeSpec, plugin string) error {
	sock := filepath.Join(s.Dir, "sock", spec.Name+".sock")
	n := &Node{Spec: spec}
	args, env, err := s.nodeProcess(spec, sock)
	if err != nil {
		return err
	}
	if n.Plugin, err = s.start("ebs-plugin-"+spec.Name, plugin, args, env); err != nil {
		return err
	}
	if err := waitProbe(ctx, sock, n.Plugin); err != nil {
		return err
	}
	if n.Kubelet, err = kubeletsim.Start(ctx, kubeletsim.Config{
		Client: s.Client, NodeName: spec.Name, Zone: spec.Zone, InstanceType: spec.InstanceType,
		PluginSocket: sock, RootDir: filepath.Join(s.Dir, "kubelet", spec.Name),
		Taints: []v1.Taint{{Key: AgentNotReadyTaint, Effect: v1.TaintEffectNoExecute}},
	}); err != nil {
		return err
	}
	// As in a cluster installed by upstream's guide, the node is ready for EBS Pods once its plugin has taken
	// the startup taint off: waiting here makes every stack test check that it does.
	if err := s.waitUntainted(ctx, spec.Name); err != nil {
		return err
	}
	s.Nodes[spec.Name] = n
	s.NodeOrder = append(s.NodeOrder, spec.Name)
	return nil
}

func instanceList(nodes []NodeSpec) string {
	out := ""
	for i, n := range nodes {
		if i > 0 {
			out += ", "
		}
		out += n.InstanceID + " (" + n.Zone + ")"
	}
	return out
}

// applyRBAC applies the binaries' RBAC from deploy/rbac and returns a kubeconfig per ServiceAccount.
func (s *Stack) applyRBAC(ctx context.Context, root string) (map[string]string, error) {
	files := []string{"csi-provisioner.yaml", "csi-attacher.yaml", "ebs-plugin.yaml"}
	accounts := []string{"csi-provisioner", "csi-attacher", "ebs-csi-node-sa"}
	for _, w := range s.with {
		files = append(files, w+".yaml")
		accounts = append(accounts, w)
	}
	for i, f := range files {
		files[i] = filepath.Join(root, "deploy", "rbac", f)
	}
	if err := s.Cluster.Apply(ctx, files...); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, sa := range accounts {
		kc, err := s.Cluster.ServiceAccountKubeconfig(ctx, rbacNamespace, sa)
		if err != nil {
			return nil, err
		}
		out[sa] = kc
	}
	if s.unionRBAC {
		var inPod []string
		for sa := range out {
			if slices.Contains(controllerPodAccounts, sa) {
				inPod = append(inPod, sa)
			}
		}
		kc, err := s.bindUnion(ctx, inPod)
		if err != nil {
			return nil, err
		}
		for _, sa := range inPod {
			out[sa] = kc
		}
	}
	return out, nil
}

// createCSIDriver registers ebs.csi.aws.com from deploy/csidriver, the manifest users apply.
func (s *Stack) createCSIDriver(ctx context.Context, root string) error {
	f := filepath.Join(root, "deploy", "csidriver", Driver+".yaml")
	if err := s.Cluster.Apply(ctx, f); err != nil {
		return fmt.Errorf("apply CSIDriver %s: %w", Driver, err)
	}
	d, err := s.Client.StorageV1().CSIDrivers().Get(ctx, Driver, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("CSIDriver %s after applying %s: %w", Driver, f, err)
	}
	if d.Spec.AttachRequired == nil || !*d.Spec.AttachRequired {
		return fmt.Errorf("CSIDriver %s from %s does not require attachment", Driver, f)
	}
	return nil
}

// baseEnv is the whole environment of a sidecar: nothing inherited.
func baseEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH")}
}

// awsEnv is what ebs-plugin's environment adds to its container's outside a Pod: the emulated region and
// instance metadata (the controller's: none), and no shared config, profile or CA bundle of this machine.
// The EC2 endpoint and the controller's credentials replace the chart's ConfigMap and Secret values
// (controllerProcess, nodeProcess).
func (s *Stack) awsEnv(instanceID string) []string {
	env := append(baseEnv(),
		"HOME="+s.Dir,
		"AWS_REGION="+Region,
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
	)
	if instanceID != "" {
		env = append(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT="+s.EC2.IMDSURL(instanceID))
	} else {
		env = append(env, "AWS_EC2_METADATA_DISABLED=true")
	}
	return env
}

func (s *Stack) start(name, bin string, args, env []string) (*Process, error) {
	logDir := s.logDir()
	p, err := startProcess(name, bin, args, env, logDir)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs = append(s.procs, p)
	if s.specs == nil {
		s.specs = map[string]procSpec{}
	}
	s.specs[name] = procSpec{bin: bin, args: args, env: env, logDir: logDir}
	return p, nil
}

// waitProbe waits (up to a minute) until the plugin at sock answers Probe, or fails if the process exits
// first.
func waitProbe(ctx context.Context, sock string, p *Process) error {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return poll(ctx, p.Name+" answering Probe on "+sock, func(ctx context.Context) (bool, string, error) {
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := csi.NewIdentityClient(conn).Probe(callCtx, &csi.ProbeRequest{})
		if err == nil {
			return true, "", nil
		}
		if done, exitErr := p.Exited(); done {
			return false, "", fmt.Errorf("%s exited before serving (%v):\n%s", p.Name, exitErr, p.Tail(30))
		}
		return false, err.Error(), nil
	})
}

// Processes are the Stowage processes of the stack, in start order.
func (s *Stack) Processes() []*Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Process(nil), s.procs...)
}

// Kubeconfig is the admin kubeconfig of the control plane.
func (s *Stack) Kubeconfig() string { return s.Cluster.Kubeconfig() }

// LogTails returns the last lines of every Stowage process's log and of the control plane's.
func (s *Stack) LogTails(lines int) string {
	var out string
	for _, p := range s.Processes() {
		out += fmt.Sprintf("--- last lines of %s ---\n%s\n", p.LogPath, p.Tail(lines))
	}
	if s.Cluster != nil {
		out += s.Cluster.LogTail(lines)
	}
	return out
}

// Stop tears everything down in the order that leaves nothing behind: the kubelets first (they unpublish,
// unstage and unmount while the node plugins still run), then the Stowage processes, then the emulator
// (which releases its loop devices), then the control plane, and finally the directory if Start made it.
func (s *Stack) Stop() error {
	var errs []error
	names := make([]string, 0, len(s.Nodes))
	for name := range s.Nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if k := s.Nodes[name].Kubelet; k != nil {
			if err := k.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop kubeletsim %s: %w", name, err))
			}
		}
	}
	procs := s.Processes()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop(stopGrace)
	}
	if s.EC2 != nil {
		if err := s.EC2.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close ec2sim: %w", err))
		}
	}
	if s.Cluster != nil {
		if err := s.Cluster.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	// Never delete a tree that still has something mounted in it: that would delete the volume's data.
	if left, err := kubeletsim.MountsUnder(s.Dir); err != nil || len(left) > 0 {
		errs = append(errs, fmt.Errorf("mounts left under %s: %v (%v)", s.Dir, left, err))
	} else if s.removeDir {
		if err := os.RemoveAll(s.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// waitUntainted waits until the node plugin has removed AgentNotReadyTaint from node.
func (s *Stack) waitUntainted(ctx context.Context, node string) error {
	return s.waitTaint(ctx, node, AgentNotReadyTaint, false)
}

// waitTaint waits, at most StepTimeout, until node carries a taint with key (present) or none (!present).
func (s *Stack) waitTaint(ctx context.Context, node, key string, present bool) error {
	ctx, cancel := context.WithTimeout(ctx, StepTimeout)
	defer cancel()
	what := fmt.Sprintf("node %s with taint %s: %v", node, key, present)
	return poll(ctx, what, func(ctx context.Context) (bool, string, error) {
		n, err := s.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		has := slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == key })
		return has == present, fmt.Sprintf("taints %v", n.Spec.Taints), nil
	})
}
