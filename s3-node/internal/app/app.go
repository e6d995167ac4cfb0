// Package app wires the node plugin together: Kubernetes clients and informers, the mounter, the CSI
// server, the unmounter and the startup-taint removal.
package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/s3-node/internal/attachments"
	"github.com/stowage-csi/stowage/s3-node/internal/credentials"
	"github.com/stowage-csi/stowage/s3-node/internal/driver"
	"github.com/stowage-csi/stowage/s3-node/internal/mounter"
	"github.com/stowage-csi/stowage/s3-node/internal/unmounter"
	"github.com/stowage-csi/stowage/shared/csiserver"
	"github.com/stowage-csi/stowage/shared/kubeclient"
	"github.com/stowage-csi/stowage/shared/s3api"
	"github.com/stowage-csi/stowage/shared/startuptaint"
)

// Config is the parsed command line and environment.
type Config struct {
	Endpoint, NodeID, Version, MountpointVersion string
	// Kubeconfig is Stowage's --kubeconfig; empty means in-cluster, as upstream.
	Kubeconfig string
	// Namespace is MOUNTPOINT_NAMESPACE.
	Namespace string
	// KubeletPath is CONTAINER_KUBELET_PATH: the kubelet root as this process sees it.
	KubeletPath string
	// UnmountInterval is the unmounter's sweep period.
	UnmountInterval time.Duration
	// Env reads the environment (os.Getenv).
	Env func(string) string
}

type clients struct {
	kube    kubernetes.Interface
	dynamic dynamic.Interface
}

// Validate checks what Run needs before it connects to anything; a validate-only run (STOWAGE_VALIDATE_ONLY)
// runs it too. The Kubernetes client configuration is not checked: in-cluster, only a Pod has it.
func (c Config) Validate() error {
	if c.NodeID == "" {
		return errors.New("--node-id (or CSI_NODE_NAME) is required")
	}
	if _, _, err := csiserver.ParseEndpoint("--endpoint", c.Endpoint); err != nil {
		return err
	}
	if c.UnmountInterval <= 0 {
		return fmt.Errorf("--unmount-sweep-interval %s must be positive", c.UnmountInterval)
	}
	return nil
}

// Run serves until ctx ends.
func Run(ctx context.Context, c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	rc, err := kubeclient.RESTConfig(kubeclient.Options{Kubeconfig: c.Kubeconfig, UserAgent: "s3-node/" + c.Version})
	if err != nil {
		return err
	}
	var cl clients
	if cl.kube, err = kubernetes.NewForConfig(kubeclient.ForCore(rc)); err != nil {
		return fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	if cl.dynamic, err = dynamic.NewForConfig(kubeclient.ForCRDs(rc)); err != nil {
		return fmt.Errorf("creating the dynamic client: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	podFactory := informers.NewSharedInformerFactoryWithOptions(cl.kube, newInformerFactoryResync,
		informers.WithNamespace(c.Namespace), informers.WithTransform(kubeclient.StripManagedFields),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", c.NodeID).String()
		}))
	podInformer := podFactory.Core().V1().Pods()
	pods := podInformer.Lister().Pods(c.Namespace)
	attInformer, listAttachments := attachmentInformer(ctx, cl.dynamic, c.NodeID)

	m := mounter.New(mounter.Config{Sys: mounter.Linux{}, Paths: mounter.Paths{Kubelet: c.KubeletPath}})
	um := unmounter.New(unmounter.Config{Mounter: m, Pods: pods, Interval: c.UnmountInterval})
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: um.OnPodUpdate}); err != nil {
		return err
	}
	podFactory.Start(ctx.Done())
	go attInformer.RunWithContext(ctx)
	logger.Info("Waiting for the informer caches", "namespace", c.Namespace, "node", c.NodeID)
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.Informer().HasSynced, attInformer.HasSynced) {
		return fmt.Errorf("informer caches did not sync: %w", context.Cause(ctx))
	}

	d := driver.New(driver.Options{
		NodeID: c.NodeID, Endpoint: c.Endpoint, Version: c.Version, KubernetesVersion: kubernetesVersion(&cl),
		InstallationType: c.Env("INSTALLATION_TYPE"),
		Lookup:           &attachments.Store{List: listAttachments, Pods: pods, Namespace: c.Namespace},
		Mounter:          m,
		DriverCredentials: credentials.DriverEnv{
			AccessKeyID: c.Env("AWS_ACCESS_KEY_ID"), SecretAccessKey: c.Env("AWS_SECRET_ACCESS_KEY"), SessionToken: c.Env("AWS_SESSION_TOKEN"),
			RoleARN: c.Env("AWS_ROLE_ARN"), WebIdentityTokenFile: c.Env("AWS_WEB_IDENTITY_TOKEN_FILE"),
			ContainerCredentialsFullURI: c.Env("AWS_CONTAINER_CREDENTIALS_FULL_URI"), ContainerAuthorizationTokenFile: c.Env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"),
		},
		NodeEnv:             nodeEnv(c.Env),
		PodIdentityAgentURI: c.Env("EKS_POD_IDENTITY_AGENT_CONTAINER_CREDENTIALS_FULL_URI"),
	})

	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		um.Run(ctx)
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		// Waits for the kubelet to list the driver in the CSINode, so that no pod needing an S3 volume lands
		// here before the plugin serves; it only fails when ctx ends.
		if err := startuptaint.Remove(ctx, startuptaint.Config{
			Client: cl.kube, NodeName: c.NodeID, Driver: s3api.DriverName, TaintKey: s3api.TaintAgentNotReady,
		}); err != nil {
			logger.Info("Stopped before the startup taint was removed", "reason", err.Error())
		}
	}()
	err = d.Run(ctx)
	cancel()
	<-done
	<-done
	return err
}

// nodeEnvKeys are the node plugin's variables passed on to every Mountpoint: upstream's region settings, and
// (Stowage) the SDK's endpoint overrides, for S3-compatible servers, VPC endpoints or a private STS. Only the
// operator sets them, on the DaemonSet; a volume still cannot (mountpointEnv allows proxies only).
var nodeEnvKeys = []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_STS_REGIONAL_ENDPOINTS",
	"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_STS"}

// nodeEnv are the nodeEnvKeys the node plugin has.
func nodeEnv(env func(string) string) map[string]string {
	out := map[string]string{}
	for _, k := range nodeEnvKeys {
		if v := env(k); v != "" {
			out[k] = v
		}
	}
	return out
}
