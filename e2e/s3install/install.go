// Package s3install installs Stowage's S3 stack on real nodes as a user would: the images assembled from this
// tree, versitygw as S3 on the Pod network's gateway with its keys in the chart's aws-secret, and `helm
// install` of deploy/helm/stowage-s3 with its defaults but for the images. Start returns once the real
// kubelets registered the driver, its startup taint left every node and the plugins answer their liveness
// probe; it takes a context and returns errors, so a command (the demo) uses it as tests do (ForTest).
package s3install

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/helm"
	"github.com/stowage-csi/stowage/e2e/images"
	"github.com/stowage-csi/stowage/e2e/node"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3server"
	"github.com/stowage-csi/stowage/e2e/tools"
	"github.com/stowage-csi/stowage/shared/s3api"
)

const (
	// Namespace is where the chart goes, as in its defaults.
	Namespace = "kube-system"
	// Release is the helm release's name.
	Release = "stowage-s3"
	// ImageTag is the tag of every Stowage image Start assembles and the chart runs.
	ImageTag = "e2e"

	defaultInstallTimeout  = 5 * time.Minute
	defaultRegisterTimeout = 3 * time.Minute
	// startTimeout covers ForTest's cold builds (the control plane, the kubelet, containerd, Stowage) and the
	// start itself, as the real-node rig allows for them.
	startTimeout = 50 * time.Minute
	// cleanupMargin is left before the test binary's deadline so a start that runs out of time fails with its
	// own error and the teardown still runs.
	cleanupMargin = time.Minute
)

// Options change what Start installs.
type Options struct {
	// Nodes are the real nodes (default: node-a in zone-a and node-b in zone-b, each registering with the
	// driver's startup taint, as upstream recommends, so that no Pod needing a volume lands before the plugin).
	Nodes []node.Spec
	// Values are chart values set over Start's (merged map by map), e.g. a container's image or arguments.
	Values map[string]any
	// Dir holds the install's files (images, versitygw's data and log, helm's state); empty: a temporary
	// directory that Stop removes.
	Dir string
	// Progress, if set, gets a line at each step of the start.
	Progress func(format string, args ...any)
	// InstallTimeout bounds helm install's wait for the release's workloads, and Stop's for its Pods to go
	// (default 5 minutes).
	InstallTimeout time.Duration
	// Provisioner enables the chart's dynamic provisioning (sidecars.provisioner.enabled) with s3-controller
	// pointed at versitygw, whose endpoint exists only once Start runs it (provisionerValues).
	Provisioner bool
	// RegisterTimeout bounds each node's wait for the kubelet to register the driver and for the startup
	// taint to leave (default 3 minutes).
	RegisterTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if len(o.Nodes) == 0 {
		taint := []string{s3api.TaintAgentNotReady + "=true:NoExecute"}
		o.Nodes = []node.Spec{{Name: "node-a", Zone: "zone-a", Taints: taint}, {Name: "node-b", Zone: "zone-b", Taints: taint}}
	}
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
	if o.InstallTimeout == 0 {
		o.InstallTimeout = defaultInstallTimeout
	}
	if o.RegisterTimeout == 0 {
		o.RegisterTimeout = defaultRegisterTimeout
	}
	return o
}

// Stack is stowage-s3 installed on real nodes.
type Stack struct {
	Cluster *node.Cluster
	// Client and Dynamic are the cluster's admin clients (Dynamic for the MountpointS3PodAttachments).
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// S3 is versitygw on the Pod network's gateway; the chart's aws-secret holds its keys.
	S3 *s3server.Server

	opts        Options
	dir         string
	ownDir      bool
	helm        *helm.Client
	installed   bool // helm install ran, even if it failed: a failed release is uninstalled too
	uninstalled bool
	stopped     bool
}

// Start builds Stowage's binaries and images, starts the real nodes with them and the test images, versitygw
// and the chart, and waits for the driver to be registered and live on every node. On error, everything it
// started is torn down and the error names the step that failed.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	o = o.withDefaults()
	s := &Stack{opts: o, dir: o.Dir}
	if s.dir == "" {
		if s.dir, err = os.MkdirTemp("", "stowage-s3install-"); err != nil {
			return nil, fmt.Errorf("create the install's directory: %w", err)
		}
		s.ownDir = true
	} else if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create the install's directory: %w", err)
	}
	defer func() {
		if err == nil {
			return
		}
		if stopErr := s.Stop(context.WithoutCancel(ctx)); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("tear down the failed start: %w", stopErr))
		}
	}()
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Stack) start(ctx context.Context) error {
	o := s.opts
	root, err := rig.RepoRoot(".")
	if err != nil {
		return err
	}
	o.Progress("building Stowage's binaries and images")
	archives, err := images.Stowage(ctx, root, filepath.Join(s.dir, "bin"), ImageTag)
	if err != nil {
		return fmt.Errorf("build Stowage's images: %w", err)
	}
	test, err := images.TestImages(ctx, images.TestOptions{CacheDir: tools.CacheDir(root), RepoRoot: root})
	if err != nil {
		return fmt.Errorf("assemble the test images: %w", err)
	}
	for _, a := range test {
		archives = append(archives, a.Path)
	}
	o.Progress("starting the control plane and %d real nodes (waits while another real-node cluster runs)", len(o.Nodes))
	// StartCluster tears down what it started when it fails.
	if s.Cluster, err = node.StartCluster(ctx, node.ClusterOptions{Nodes: o.Nodes, Images: archives}); err != nil {
		return fmt.Errorf("start the cluster with real nodes: %w", err)
	}
	s.Client = s.Cluster.Client()
	if s.Dynamic, err = dynamic.NewForConfig(s.Cluster.RESTConfig()); err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	// Pods reach the host only through their network's gateway.
	gateway := s.Cluster.Network.Gateway.String()
	o.Progress("starting versitygw on %s", gateway)
	if s.S3, err = s3server.StartInOn(ctx, filepath.Join(s.dir, "s3"), gateway); err != nil {
		return fmt.Errorf("start versitygw on %s: %w", gateway, err)
	}
	if err := s.install(ctx, root); err != nil {
		return err
	}
	for _, n := range s.Cluster.Nodes {
		o.Progress("waiting for %s to be registered on %s", s3api.DriverName, n.Name)
		if err := waitRegistered(ctx, s.Client, n.Name, o.RegisterTimeout); err != nil {
			return fmt.Errorf("registration on %s: %w\n%s", n.Name, err, s.diagnosis(ctx))
		}
	}
	o.Progress("checking the plugins' liveness")
	if err := checkLiveness(ctx, s.Client, len(s.Cluster.Nodes)); err != nil {
		return fmt.Errorf("liveness: %w\n%s", err, s.diagnosis(ctx))
	}
	return nil
}

// install creates the chart's aws-secret with versitygw's keys and runs helm install.
func (s *Stack) install(ctx context.Context, root string) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "aws-secret", Namespace: Namespace},
		StringData: map[string]string{"key_id": s.S3.AccessKey, "access_key": s.S3.SecretKey}}
	if _, err := s.Client.CoreV1().Secrets(Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Secret aws-secret: %w", err)
	}
	home := filepath.Join(s.dir, "helm")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	var err error
	if s.helm, err = helm.New(ctx, s.Cluster.Kubeconfig(), home); err != nil {
		return fmt.Errorf("build helm: %w", err)
	}
	s.opts.Progress("helm install %s", Release)
	vals := values()
	if s.opts.Provisioner {
		vals = helm.MergeValues(vals, provisionerValues(s.S3.Endpoint))
	}
	s.installed = true
	out, err := s.helm.Install(ctx, Release, filepath.Join(root, "deploy", "helm", "stowage-s3"), Namespace,
		helm.MergeValues(vals, s.opts.Values), s.opts.InstallTimeout)
	if err != nil {
		// The nodes' logs too: the teardown that follows removes them, and a Pod that never started says why
		// only there (an image not imported, a sandbox that failed).
		return fmt.Errorf("helm install %s: %w\n%s\n%s", Release, err, s.diagnosis(ctx), s.Cluster.NodeLogTail(20))
	}
	s.opts.Progress("helm install:\n%s", out)
	return nil
}

// diagnosis is what the install's Pods and the namespace's Events say, read even when ctx ended (a wait
// that ran out of time is when it is needed most).
func (s *Stack) diagnosis(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return rig.PodDiagnosis(ctx, s.Client, Namespace)
}

// ForTest is Start for one test: it fails t if the start fails, and when t ends logs the control plane's and
// the nodes' log tails if t failed, then stops the stack. Progress defaults to t.Logf.
func ForTest(t testing.TB, o Options) *Stack {
	t.Helper()
	if o.Progress == nil {
		o.Progress = t.Logf
	}
	ctx, cancel := context.WithDeadline(context.Background(), rig.StartDeadline(t, startTimeout, cleanupMargin))
	defer cancel()
	s, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() && !s.stopped {
			t.Logf("control plane logs:\n%s", s.Cluster.LogTail(30))
			t.Logf("node logs:\n%s", s.Cluster.NodeLogTail(40))
		}
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("stop the S3 stack: %v", err)
		}
	})
	return s
}
