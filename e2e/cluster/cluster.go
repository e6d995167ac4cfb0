package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/e2e/tools"
)

// stopGrace is how long a child gets to exit after SIGTERM before it is killed.
const stopGrace = 10 * time.Second

// Options configure Start. The zero value is a good default.
type Options struct {
	// Dir holds the control plane's data, certificates, kubeconfigs and logs. Empty means a new temporary
	// directory, which Stop removes; a Dir given here is kept.
	Dir string
	// CacheDir is where the built binaries are cached (under bin/). Empty means $STOWAGE_CACHE_DIR, else
	// <repo root>/.cache.
	CacheDir string
	// APIServerArgs and ControllerManagerArgs are appended to the default flags; a repeated flag wins.
	APIServerArgs         []string
	ControllerManagerArgs []string
	// Scheduler also starts kube-scheduler (built on first use), for tests whose Pods are placed by it rather
	// than created with spec.nodeName: WaitForFirstConsumer claims of generic ephemeral volumes need it.
	Scheduler bool
	// NodeAddress, when set, readies the API server for real nodes (e2e/node) whose Pods reach it from their
	// own network at this address: it listens on every address instead of loopback only, advertises this one
	// as the endpoint of the kubernetes Service, its serving certificate names it and the Service's names,
	// and it reaches the kubelets for logs and exec with the admin certificate.
	NodeAddress net.IP
}

// Cluster is a running control plane: etcd, kube-apiserver and kube-controller-manager.
type Cluster struct {
	dir        string
	removeDir  bool
	certs      *pki
	config     *rest.Config
	kubeconfig string
	client     kubernetes.Interface

	mapper  meta.ResettableRESTMapper
	dynamic dynamic.Interface

	mu      sync.Mutex
	procs   []*process // in start order; stopped in reverse
	stopped bool
	stopErr error
}

// Start builds the control-plane binaries if they are not cached yet, starts etcd, kube-apiserver and
// kube-controller-manager on free loopback ports, and returns once all are ready and the default
// ServiceAccount exists. On error, everything it started is stopped again.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	logger := klog.FromContext(ctx)
	wd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("working directory: %w", err)
	}
	root, err := RepoRoot(wd)
	if err != nil {
		return nil, err
	}
	cache := opts.CacheDir
	if cache == "" {
		cache = tools.CacheDir(root)
	}
	bins, err := ensureBinaries(ctx, root, cache)
	if err != nil {
		return nil, err
	}

	c := &Cluster{dir: opts.Dir}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "stowage-cluster-"); err != nil {
			return nil, fmt.Errorf("create cluster dir: %w", err)
		}
		c.removeDir = true
	} else if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cluster dir: %w", err)
	}
	defer func() {
		if err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}
	}()
	logDir := filepath.Join(c.dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	if c.certs, err = writePKI(filepath.Join(c.dir, "pki"), opts.NodeAddress); err != nil {
		return nil, err
	}

	logger.Info("Starting control plane", "dir", c.dir)
	etcd, etcdURL, err := startEtcd(ctx, bins.etcd, c.dir, logDir)
	if err != nil {
		return nil, err
	}
	c.track(etcd)
	apiserverArgs := opts.APIServerArgs
	if opts.NodeAddress != nil {
		apiserverArgs = append(nodeFacingArgs(opts.NodeAddress, c.certs), apiserverArgs...)
	}
	apiserver, cfg, err := startAPIServer(ctx, bins.apiserver, c.dir, logDir, etcdURL, c.certs, apiserverArgs)
	if err != nil {
		return nil, err
	}
	c.track(apiserver)
	c.config = cfg
	if err := c.writeClients(); err != nil {
		return nil, err
	}

	kcmConfig := filepath.Join(c.dir, "kube-controller-manager.kubeconfig")
	kcmCreds := credentials{certPEM: c.certs.controllerManager.certPEM, keyPEM: c.certs.controllerManager.keyPEM}
	if err := writeKubeconfig(kcmConfig, cfg.Host, c.certs.ca.certPEM, controllerManagerUser, kcmCreds); err != nil {
		return nil, err
	}
	kcm, err := startControllerManager(ctx, bins.controllerManager, c.dir, logDir, kcmConfig, c.certs, opts.ControllerManagerArgs)
	if err != nil {
		return nil, err
	}
	c.track(kcm)
	if err := c.waitDefaultServiceAccount(ctx); err != nil {
		return nil, kcm.failure("did not create the default ServiceAccount", err)
	}
	if opts.Scheduler {
		if err := c.startScheduler(ctx, root, cache, logDir); err != nil {
			return nil, err
		}
	}
	logger.Info("Control plane ready", "server", cfg.Host, "kubeconfig", c.kubeconfig)
	return c, nil
}

// startScheduler builds kube-scheduler if the cache lacks it and starts it under its own client certificate.
func (c *Cluster) startScheduler(ctx context.Context, root, cache, logDir string) error {
	paths, err := tools.Ensure(ctx, root, cache, tools.KubeScheduler())
	if err != nil {
		return err
	}
	config := filepath.Join(c.dir, "kube-scheduler.kubeconfig")
	creds := credentials{certPEM: c.certs.scheduler.certPEM, keyPEM: c.certs.scheduler.keyPEM}
	if err := writeKubeconfig(config, c.config.Host, c.certs.ca.certPEM, schedulerUser, creds); err != nil {
		return err
	}
	p, err := startScheduler(ctx, paths["kube-scheduler"], c.dir, logDir, config, c.certs)
	if err != nil {
		return err
	}
	c.track(p)
	return nil
}

func (c *Cluster) track(p *process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs = append(c.procs, p)
}

// writeClients writes the admin kubeconfig and builds the admin clients.
func (c *Cluster) writeClients() error {
	c.kubeconfig = filepath.Join(c.dir, "admin.kubeconfig")
	creds := credentials{certPEM: c.certs.admin.certPEM, keyPEM: c.certs.admin.keyPEM}
	if err := writeKubeconfig(c.kubeconfig, c.config.Host, c.certs.ca.certPEM, adminUser, creds); err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	c.client = client
	return c.initApply()
}

// waitDefaultServiceAccount waits for the ServiceAccount controller to create default/default: Pods
// cannot be created before it exists, and it shows the controllers are working.
func (c *Cluster) waitDefaultServiceAccount(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := c.client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// Stop ends every child process (SIGTERM to its process group, SIGKILL after a grace period) and removes
// the cluster's directory if Start created it. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return c.stopErr
	}
	c.stopped = true
	// Reverse start order: etcd last, so the others never lose their backend while shutting down.
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].Stop(stopGrace)
	}
	if c.removeDir {
		if err := os.RemoveAll(c.dir); err != nil {
			c.stopErr = fmt.Errorf("remove cluster dir: %w", err)
		}
	}
	return c.stopErr
}

// RESTConfig returns a new admin (system:masters) REST config for the API server.
func (c *Cluster) RESTConfig() *rest.Config {
	return rest.CopyConfig(c.config)
}

// Kubeconfig returns the path of the admin kubeconfig.
func (c *Cluster) Kubeconfig() string {
	return c.kubeconfig
}

// Client returns an admin clientset.
func (c *Cluster) Client() kubernetes.Interface {
	return c.client
}

// LogTail returns the last lines of each component's log, for a failing test to print.
func (c *Cluster) LogTail(lines int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, p := range c.procs {
		fmt.Fprintf(&b, "--- last lines of %s ---\n%s\n", p.LogPath, p.Tail(lines))
	}
	return b.String()
}
