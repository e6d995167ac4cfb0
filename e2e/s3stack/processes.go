package s3stack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stowage-csi/stowage/e2e/kubeletsim"
	"github.com/stowage-csi/stowage/e2e/rendered"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// baseEnv is the whole environment of a driver process: nothing inherited, so no AWS_* of this machine
// (AWS_CA_BUNDLE in particular) leaks in.
func baseEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
}

// ControllerName, ProvisionerName and NodeProcess name the processes for Process and Restart.
const (
	ControllerName  = "s3-controller"
	ProvisionerName = "csi-provisioner"
)

// NodeProcess is the name of a node's s3-node process.
func NodeProcess(node string) string { return "s3-node-" + node }

// buildBinaries builds the driver's binaries into dir, and csi-provisioner with provisioner.
func buildBinaries(ctx context.Context, root, dir string, provisioner bool) (map[string]string, error) {
	out := map[string]string{}
	bins := []struct{ module, name string }{
		{"s3-controller", "s3-controller"}, {"s3-node", "s3-node"}, {"s3-mounter", "s3-mounter"}, {"s3-mounter", "s3-fuse"},
	}
	if provisioner {
		bins = append(bins, struct{ module, name string }{"provisioner", "csi-provisioner"})
	}
	for _, b := range bins {
		bin, err := rig.BuildCommand(ctx, root, b.module, b.name, dir)
		if err != nil {
			return nil, fmt.Errorf("build the S3 driver's binaries: %w", err)
		}
		out[b.name] = bin
	}
	return out, nil
}

// Every process's args and env come from the stowage-s3 chart rendered with its default values (with
// sidecars.provisioner.enabled for Options.Provisioner) through e2e/rendered: what the stack runs is what a
// user installs, and a flag the chart passes that a binary rejects fails the stack's start. What a process
// outside a Pod must differ in is named below, and the few test-only settings are in testOnly*.

// testOnlyControllerArgs: s3-controller logs at level 4, for the log tails of a failing test.
var testOnlyControllerArgs = []string{"--v=4"}

// testOnlyProvisionerArgs: csi-provisioner retries a failed claim after 500 ms, at most every 30 s (its
// defaults: 1 s and 5 min), so a test's claim is provisioned in seconds once its cause is gone.
var testOnlyProvisionerArgs = []string{"--retry-interval-start=500ms", "--retry-interval-max=30s"}

// testOnlyNodeArgs: s3-node sweeps for Mountpoint Pods to unmount every 5 s (its default: 2 min), so a
// test sees a volume's teardown finish in seconds.
var testOnlyNodeArgs = []string{"--unmount-sweep-interval=5s"}

// controllerProcess is s3-controller's command line and environment: its container, under the stack's
// ServiceAccount kubeconfig with the lease in the driver's namespace, the metrics and health servers off (a
// Pod has its own ports; stacks on one machine would collide), the Mountpoint image the kubelet simulators
// run and the rig's Mountpoint version label. With ControllerSocket, the CSI controller service on the
// stack's socket, pointed at the S3 server with its credentials (the chart's aws-secret).
func (s *Stack) controllerProcess() (args, env []string, err error) {
	render := rendered.S3
	if s.ControllerSocket != "" {
		render = rendered.S3Provisioner
	}
	c, err := rendered.Get(render, "Deployment/s3-csi-controller/s3-csi-controller")
	if err != nil {
		return nil, nil, err
	}
	o := rendered.Outside{
		Env: map[string]string{"MOUNTPOINT_IMAGE": MountpointImage},
		Add: append([]string{"--kubeconfig=" + s.Kubeconfigs[ControllerAccount], "--leader-election-namespace=" + Namespace,
			"--metrics-bind-address=0", "--health-probe-bind-address=0"}, testOnlyControllerArgs...),
		AddEnv: append(baseEnv(), "MOUNTPOINT_VERSION="+MountpointVersion),
	}
	if s.ControllerSocket != "" {
		o.Flags = map[string]string{"csi-endpoint": "unix://" + s.ControllerSocket}
		o.Env["AWS_ACCESS_KEY_ID"], o.Env["AWS_SECRET_ACCESS_KEY"] = s.S3.AccessKey, s.S3.SecretKey
		o.Drop = []string{"AWS_SESSION_TOKEN"} // static keys: no session
		o.Add = append(o.Add, "--s3-endpoint-url="+s.S3.Endpoint, "--s3-force-path-style")
		o.AddEnv = append(o.AddEnv, "AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true")
	}
	return c.Process(o)
}

// startController runs s3-controller (controllerProcess); with ControllerSocket it waits for Probe.
func (s *Stack) startController(ctx context.Context) error {
	args, env, err := s.controllerProcess()
	if err != nil {
		return err
	}
	// Without a socket there is nothing to wait for: the binary parses its flags first (rendered.CheckFlags).
	if err := rendered.CheckFlags(ctx, s.Bins["s3-controller"], args, env); err != nil {
		return err
	}
	p, err := s.start(ControllerName, s.Bins["s3-controller"], args, env)
	if err != nil || s.ControllerSocket == "" {
		return err
	}
	return waitProbe(ctx, s.ControllerSocket, p)
}

// startProvisioner runs csi-provisioner from the chart's container beside s3-controller (dynamic
// provisioning) on the controller's socket, under its own ServiceAccount with the lease in the driver's
// namespace, after the binary has parsed its flags (rendered.CheckFlags: it serves no socket to wait for).
func (s *Stack) startProvisioner(ctx context.Context) error {
	c, err := rendered.Get(rendered.S3Provisioner, "Deployment/s3-csi-controller/csi-provisioner")
	if err != nil {
		return err
	}
	args, env, err := c.Process(rendered.Outside{
		Env: map[string]string{"ADDRESS": "unix://" + s.ControllerSocket},
		Add: append([]string{"--kubeconfig=" + s.Kubeconfigs[ProvisionerAccount], "--leader-election-namespace=" + Namespace},
			testOnlyProvisionerArgs...),
		AddEnv: baseEnv(),
	})
	if err != nil {
		return err
	}
	if err := rendered.CheckFlags(ctx, s.Bins["csi-provisioner"], args, env); err != nil {
		return err
	}
	_, err = s.start(ProvisionerName, s.Bins["csi-provisioner"], args, env)
	return err
}

// nodeProcess is a node's s3-node: its container with the node's socket, name and kubelet root (for the
// Pod's host paths), driver-level credentials for the S3 server (the chart's aws-secret), its ServiceAccount
// kubeconfig, and with Options.STS the endpoints it passes to Mountpoint. The EKS Pod Identity agent's
// link-local address exists on EKS nodes only: dropped.
func (s *Stack) nodeProcess(n *Node) (args, env []string, err error) {
	c, err := rendered.Get(rendered.S3, "DaemonSet/s3-csi-node/s3-plugin")
	if err != nil {
		return nil, nil, err
	}
	return c.Process(rendered.Outside{
		Env: map[string]string{
			"CSI_ENDPOINT": "unix://" + n.Socket, "CSI_NODE_NAME": n.Name,
			"KUBELET_PATH": n.RootDir, "HOST_PLUGIN_DIR": filepath.Dir(n.Socket),
			"AWS_ACCESS_KEY_ID": s.S3.AccessKey, "AWS_SECRET_ACCESS_KEY": s.S3.SecretKey,
		},
		Drop: []string{"AWS_SESSION_TOKEN", "EKS_POD_IDENTITY_AGENT_CONTAINER_CREDENTIALS_FULL_URI"},
		Add:  append([]string{"--kubeconfig=" + s.Kubeconfigs[NodeAccount]}, testOnlyNodeArgs...),
		AddEnv: append(append(baseEnv(), "CONTAINER_KUBELET_PATH="+n.RootDir, "HOST_KUBELET_PATH="+n.RootDir, "AWS_REGION=us-east-1"),
			s.stsNodeEnv()...),
	})
}

// startNode starts the node's s3-node (as root, like the privileged DaemonSet Pod; driver-level credentials
// for the S3 server in its env, as from upstream's aws-secret), waits until it answers Probe, and starts the
// node's kubelet simulator with the startup taint the plugin removes once registered. The simulator runs the
// Mountpoint image as s3-mounter, with s3-fuse as Mountpoint's mount-s3.
func (s *Stack) startNode(ctx context.Context, name string) error {
	n := &Node{Name: name, Socket: filepath.Join(s.Dir, "sock", name+".sock"), RootDir: filepath.Join(s.Dir, "kubelet", name)}
	if err := os.MkdirAll(n.RootDir, 0o750); err != nil {
		return err
	}
	args, env, err := s.nodeProcess(n)
	if err != nil {
		return err
	}
	if n.Plugin, err = s.start(NodeProcess(name), s.Bins["s3-node"], args, env); err != nil {
		return err
	}
	if err := waitProbe(ctx, n.Socket, n.Plugin); err != nil {
		return err
	}
	if n.Kubelet, err = kubeletsim.Start(ctx, kubeletsim.Config{
		Client: s.Client, NodeName: name, PluginSocket: n.Socket, RootDir: n.RootDir,
		Taints: []v1.Taint{{Key: s3api.TaintAgentNotReady, Effect: v1.TaintEffectNoExecute}},
		Images: map[string]kubeletsim.Image{MountpointImage: {Files: map[string]string{
			"/bin/aws-s3-csi-mounter":     s.Bins["s3-mounter"],
			"/mountpoint-s3/bin/mount-s3": s.Bins["s3-fuse"],
		}}},
		MaxGracePeriod: 10 * time.Second, RestartBackoff: 200 * time.Millisecond, MaxRestartBackoff: 2 * time.Second,
	}); err != nil {
		return err
	}
	s.Nodes[name] = n
	s.NodeOrder = append(s.NodeOrder, name)
	// A workload bound to the node while the NoExecute startup taint is on would be evicted: the node is
	// ready once its plugin has taken the taint off, which every stack test thereby checks.
	return s.poll(ctx, "node "+name+" without taint "+s3api.TaintAgentNotReady, func(ctx context.Context) (bool, error) {
		node, err := s.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return !slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == s3api.TaintAgentNotReady }), nil
	})
}

// waitProbe waits (up to a minute) until the plugin at sock answers Probe, or fails if the process exits
// first.
func waitProbe(ctx context.Context, sock string, p *rig.Process) error {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	id := csi.NewIdentityClient(conn)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.Done():
			return false, fmt.Errorf("%s exited:\n%s", p.LogPath, p.Tail(40))
		default:
		}
		_, err := id.Probe(ctx, &csi.ProbeRequest{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s to answer Probe: %w", sock, err)
	}
	return nil
}
