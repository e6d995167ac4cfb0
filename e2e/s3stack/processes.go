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

// startController runs s3-controller under its ServiceAccount, with upstream's env settings (the image and
// Mountpoint version come from the chart as env), leader election in the driver's namespace, and the
// metrics and health servers off. With ControllerSocket it also serves the CSI controller service there,
// with credentials for the S3 server (as a Deployment would get them from a Secret), and waits for Probe.
func (s *Stack) startController(ctx context.Context) error {
	args := []string{
		"--kubeconfig=" + s.Kubeconfigs[ControllerAccount],
		"--leader-election-namespace=" + Namespace,
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--v=4",
	}
	env := append(baseEnv(),
		"MOUNTPOINT_NAMESPACE="+s3api.DefaultMountpointNamespace,
		"MOUNTPOINT_IMAGE="+MountpointImage,
		"MOUNTPOINT_VERSION="+MountpointVersion,
		"MOUNTPOINT_IMAGE_PULL_POLICY=IfNotPresent",
	)
	if s.ControllerSocket != "" {
		args = append(args, "--csi-endpoint=unix://"+s.ControllerSocket, "--s3-endpoint-url="+s.S3.Endpoint, "--s3-force-path-style")
		env = append(env, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID="+s.S3.AccessKey, "AWS_SECRET_ACCESS_KEY="+s.S3.SecretKey,
			"AWS_EC2_METADATA_DISABLED=true")
	}
	p, err := s.start(ControllerName, s.Bins["s3-controller"], args, env)
	if err != nil || s.ControllerSocket == "" {
		return err
	}
	return waitProbe(ctx, s.ControllerSocket, p)
}

// startProvisioner runs Stowage's csi-provisioner on the controller's socket under its own ServiceAccount,
// with --extra-create-metadata (so prefix templates may name the claim) and short retries for tests.
func (s *Stack) startProvisioner() error {
	args := []string{
		"--kubeconfig=" + s.Kubeconfigs[ProvisionerAccount], "--csi-address=unix://" + s.ControllerSocket,
		"--leader-election", "--leader-election-namespace=" + Namespace, "--extra-create-metadata",
		"--timeout=60s", "--retry-interval-start=500ms", "--retry-interval-max=30s", "--v=4",
	}
	_, err := s.start(ProvisionerName, s.Bins["csi-provisioner"], args, baseEnv())
	return err
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
	args := []string{"--endpoint=unix://" + n.Socket, "--node-id=" + name, "--kubeconfig=" + s.Kubeconfigs[NodeAccount],
		"--unmount-sweep-interval=5s", "--v=4"}
	env := append(baseEnv(),
		"CSI_NODE_NAME="+name,
		"MOUNTPOINT_NAMESPACE="+s3api.DefaultMountpointNamespace,
		"CONTAINER_KUBELET_PATH="+n.RootDir,
		"HOST_KUBELET_PATH="+n.RootDir,
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID="+s.S3.AccessKey,
		"AWS_SECRET_ACCESS_KEY="+s.S3.SecretKey,
	)
	env = append(env, s.stsNodeEnv()...)
	var err error
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
