package s3stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/cluster"
	"github.com/stowage-csi/stowage/e2e/kubeletsim"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3server"
	"github.com/stowage-csi/stowage/e2e/stssim"
	"github.com/stowage-csi/stowage/shared/s3api"
)

const (
	// Namespace is where the driver's ServiceAccounts live (upstream installs into kube-system).
	Namespace = "kube-system"
	// MountpointImage is the image s3-controller puts into Mountpoint Pods; the kubelet simulators run it
	// as s3-mounter with s3-fuse as mount-s3.
	MountpointImage = "stowage.example/s3-mounter:e2e"
	// MountpointVersion is the Mountpoint version s3-controller labels its Pods with.
	MountpointVersion = "e2e"
	// ControllerAccount and NodeAccount are the ServiceAccounts of deploy/rbac/s3-controller.yaml and
	// deploy/rbac/s3-node.yaml.
	ControllerAccount = "s3-csi-driver-controller-sa"
	NodeAccount       = "s3-csi-driver-sa"
	// ProvisionerAccount is the ServiceAccount of deploy/rbac/csi-provisioner.yaml (Options.Provisioner).
	ProvisionerAccount = "csi-provisioner"

	stopGrace = 10 * time.Second
)

// Options configure Start.
type Options struct {
	// Dir holds everything (binaries, logs, control plane, S3 data, kubelet roots, sockets). Empty means a
	// new temporary directory, removed by Stop.
	Dir string
	// Nodes are the simulated nodes' names; default node-a and node-b.
	Nodes []string
	// Progress, if set, gets one line per start-up stage.
	Progress func(format string, args ...any)
	// Provisioner serves s3-controller's CSI controller service (dynamic provisioning) on ControllerSocket,
	// pointed at the S3 server with its own credentials, and runs Stowage's csi-provisioner beside it under
	// deploy/rbac/csi-provisioner.yaml. Off, the controller runs as upstream's, without a CSI socket.
	Provisioner bool
	// STS runs versitygw with its IAM (accounts that own buckets) and the STS stand-in (e2e/stssim) for
	// pod-level credentials; s3-node passes its endpoint (AWS_ENDPOINT_URL_STS) and the S3 server's
	// (AWS_ENDPOINT_URL_S3) to Mountpoint. AddRole makes roles.
	STS bool
}

// Node is one simulated node: its s3-node process and its kubelet simulator.
type Node struct {
	Name    string
	Socket  string
	RootDir string
	Plugin  *rig.Process
	Kubelet *kubeletsim.Node
}

// Stack is the S3 driver with everything it runs against.
type Stack struct {
	Dir     string
	Cluster *cluster.Cluster
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	S3      *s3server.Server
	Nodes   map[string]*Node
	// NodeOrder lists the node names in the order given.
	NodeOrder []string
	// Kubeconfigs are the ServiceAccount kubeconfigs by name.
	Kubeconfigs map[string]string
	// Bins are the built binaries by name.
	Bins map[string]string
	// ControllerSocket is s3-controller's CSI socket with Options.Provisioner, else "".
	ControllerSocket string
	// STS is the STS stand-in with Options.STS, else nil; STSEndpoint its URL.
	STS         *stssim.Server
	STSEndpoint string
	stsListener *stssim.Listener

	removeDir bool
	mu        sync.Mutex
	procs     map[string]*rig.Process
	specs     map[string]rig.Spec
}

// Start builds the driver's binaries, starts everything and returns once every node's plugin is registered.
// On error everything started so far is stopped again.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	progress := opts.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	if len(opts.Nodes) == 0 {
		opts.Nodes = []string{"node-a", "node-b"}
	}
	root, err := rig.WorkingRepoRoot()
	if err != nil {
		return nil, err
	}
	dir, removeDir, err := rig.Workdir(opts.Dir, "stowage-s3-")
	if err != nil {
		return nil, err
	}
	s := &Stack{Dir: dir, removeDir: removeDir, Nodes: map[string]*Node{}, procs: map[string]*rig.Process{}, specs: map[string]rig.Spec{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Stop())
		}
	}()
	building := "s3-controller, s3-node, s3-mounter and s3-fuse"
	if opts.Provisioner {
		building = "s3-controller, s3-node, s3-mounter, s3-fuse and csi-provisioner"
	}
	progress("Building %s", building)
	if s.Bins, err = buildBinaries(ctx, root, filepath.Join(s.Dir, "bin"), opts.Provisioner); err != nil {
		return nil, err
	}
	progress("Starting etcd, kube-apiserver, kube-controller-manager and kube-scheduler")
	if s.Cluster, err = cluster.Start(ctx, cluster.Options{Dir: filepath.Join(s.Dir, "cluster"), Scheduler: true}); err != nil {
		return nil, err
	}
	cfg := s.Cluster.RESTConfig()
	cfg.QPS, cfg.Burst = 200, 400
	if s.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if s.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	progress("Installing the driver's CRD, CSIDriver, namespace, priority class and RBAC from deploy/")
	if err := s.install(ctx, root, opts.Provisioner); err != nil {
		return nil, err
	}
	progress("Starting the S3 server (versitygw)")
	if opts.STS {
		s.S3, err = s3server.StartInWithIAM(ctx, filepath.Join(s.Dir, "s3"))
	} else {
		s.S3, err = s3server.StartIn(ctx, filepath.Join(s.Dir, "s3"))
	}
	if err != nil {
		return nil, err
	}
	if opts.STS {
		progress("Starting the STS stand-in with the API server's ServiceAccount issuer keys")
		if err := s.startSTS(ctx); err != nil {
			return nil, err
		}
	}
	progress("Starting s3-controller")
	if opts.Provisioner {
		s.ControllerSocket = filepath.Join(s.Dir, "sock", "controller.sock")
	}
	if err := s.startController(ctx); err != nil {
		return nil, err
	}
	if opts.Provisioner {
		progress("Starting csi-provisioner on s3-controller's CSI socket")
		if err := s.startProvisioner(ctx); err != nil {
			return nil, err
		}
	}
	for _, name := range opts.Nodes {
		progress("Starting s3-node and kubeletsim for %s", name)
		if err := s.startNode(ctx, name); err != nil {
			return nil, err
		}
	}
	progress("S3 stack ready: kubeconfig %s", s.Cluster.Kubeconfig())
	return s, nil
}

func (s *Stack) logDir() string { return filepath.Join(s.Dir, "logs") }

// install applies what a user installs before the driver's workloads: the CRD, the Mountpoint namespace and
// priority class, the CSIDriver and the RBAC of both binaries (and of csi-provisioner with provisioner); then
// it makes a kubeconfig per ServiceAccount.
func (s *Stack) install(ctx context.Context, root string, provisioner bool) error {
	deploy := filepath.Join(root, "deploy")
	// The namespace and priority class come before the RBAC, which has a Role in that namespace. The optional
	// headroom objects (deploy/s3/headroom.yaml) are left out: the driver must work without them.
	files := []string{
		filepath.Join(deploy, "crds", s3api.Group+"_"+s3api.Resource+".yaml"),
		filepath.Join(deploy, "s3", "mount-s3.yaml"),
		filepath.Join(deploy, "csidriver", s3api.DriverName+".yaml"),
		filepath.Join(deploy, "rbac", "s3-controller.yaml"),
		filepath.Join(deploy, "rbac", "s3-node.yaml"),
	}
	accounts := []string{ControllerAccount, NodeAccount}
	if provisioner {
		files = append(files, filepath.Join(deploy, "rbac", "csi-provisioner.yaml"))
		accounts = append(accounts, ProvisionerAccount)
	}
	if err := s.Cluster.Apply(ctx, files...); err != nil {
		return err
	}
	s.Kubeconfigs = map[string]string{}
	for _, sa := range accounts {
		kc, err := s.Cluster.ServiceAccountKubeconfig(ctx, Namespace, sa)
		if err != nil {
			return err
		}
		s.Kubeconfigs[sa] = kc
	}
	return nil
}

// start runs a binary with exactly env (nothing inherited) and remembers it for Restart and Stop.
func (s *Stack) start(name, bin string, args, env []string) (*rig.Process, error) {
	if env == nil {
		env = []string{}
	}
	spec := rig.Spec{Name: name, Path: bin, Args: args, Env: env, LogDir: s.logDir()}
	p, err := rig.Start(spec)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs[name] = p
	s.specs[name] = spec
	return p, nil
}

// Process is the current process of a binary the stack started ("s3-controller", "s3-node-<node>").
func (s *Stack) Process(name string) *rig.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs[name]
}

// Restart starts a binary again with the same args after it ended (a kill -9 in a test).
func (s *Stack) Restart(ctx context.Context, name string) (*rig.Process, error) {
	s.mu.Lock()
	spec, ok := s.specs[name]
	old := s.procs[name]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no process %q", name)
	}
	if old != nil {
		_ = old.Wait(ctx)
	}
	p, err := rig.Start(spec)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.procs[name] = p
	s.mu.Unlock()
	return p, nil
}

// Stop tears everything down in the order that leaves nothing behind: the kubelets first (they unpublish
// while the node plugins still run and end the Mountpoint Pods' processes), then the driver's processes,
// the S3 server and the control plane, and finally the directory if Start made it.
func (s *Stack) Stop() error {
	var errs []error
	for _, name := range s.NodeOrder {
		if k := s.Nodes[name].Kubelet; k != nil {
			if err := k.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop kubeletsim %s: %w", name, err))
			}
		}
	}
	s.mu.Lock()
	procs := make([]*rig.Process, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	for _, p := range procs {
		p.Stop(stopGrace)
	}
	if s.stsListener != nil {
		if err := s.stsListener.Close(); err != nil {
			errs = append(errs, fmt.Errorf("stop the STS stand-in: %w", err))
		}
	}
	if s.S3 != nil {
		s.S3.Stop()
	}
	if s.Cluster != nil {
		if err := s.Cluster.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	// Never delete a tree that still has something mounted in it: that would delete the bucket's data.
	if left, err := kubeletsim.MountsUnder(s.Dir); err != nil || len(left) > 0 {
		errs = append(errs, fmt.Errorf("mounts left under %s: %v (%v)", s.Dir, left, err))
	} else if s.removeDir {
		if err := os.RemoveAll(s.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LogTails returns the last lines of every driver process's log and of the control plane's.
func (s *Stack) LogTails(lines int) string {
	var out string
	s.mu.Lock()
	names := make([]string, 0, len(s.procs))
	for n := range s.procs {
		names = append(names, n)
	}
	s.mu.Unlock()
	sort.Strings(names)
	for _, n := range names {
		p := s.Process(n)
		out += fmt.Sprintf("--- last lines of %s ---\n%s\n", p.LogPath, p.Tail(lines))
	}
	if s.Cluster != nil {
		out += s.Cluster.LogTail(lines)
	}
	return out
}
