package app

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	csimetrics "github.com/kubernetes-csi/csi-lib-utils/metrics"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"go.uber.org/automaxprocs/maxprocs"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/provisioner/internal/capacity"
	"github.com/stowage-csi/stowage/provisioner/internal/controller"
	"github.com/stowage-csi/stowage/provisioner/internal/metrics"
	"github.com/stowage-csi/stowage/provisioner/internal/provision"
	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/events"
	"github.com/stowage-csi/stowage/shared/flags"
	"github.com/stowage-csi/stowage/shared/httpserver"
	"github.com/stowage-csi/stowage/shared/kubeclient"
	"github.com/stowage-csi/stowage/shared/leaderelection"
	sharedmetrics "github.com/stowage-csi/stowage/shared/metrics"
	"github.com/stowage-csi/stowage/shared/version"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

const binary = "csi-provisioner"

// Run runs the provisioner until ctx ends.
func Run(ctx context.Context, cfg *Config) error {
	if err := logsapi.ValidateAndApply(cfg.Common.Logging, cfg.Common.FeatureGates); err != nil {
		return fmt.Errorf("logging flags: %w", err)
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.Common.Automaxprocs {
		if _, err := maxprocs.Set(maxprocs.Logger(klog.Infof)); err != nil {
			return fmt.Errorf("--automaxprocs: %w", err)
		}
	}
	logger := klog.FromContext(ctx)
	logger.Info("Starting", "version", version.Version)

	restCfg, err := restConfig(cfg)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(kubeclient.ForCore(restCfg))
	if err != nil {
		return fmt.Errorf("kube client: %w", err)
	}
	// Custom resources speak JSON only.
	snaps, err := snapclient.NewForConfig(kubeclient.ForCRDs(restCfg))
	if err != nil {
		return fmt.Errorf("snapshot client: %w", err)
	}

	reg := sharedmetrics.NewRegistry()
	csiMetrics := csimetrics.NewCSIMetricsManagerWithOptions("",
		csimetrics.WithCustomRegistry(reg.Kube()), csimetrics.WithProcessStartTime(false))
	conn, err := csiconn.Connect(ctx, csiconn.Options{Address: cfg.Common.CSIAddress, Timeout: cfg.Common.Timeout, Metrics: csiMetrics})
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.ProbeUntilReady(ctx); err != nil {
		return err
	}
	driver, err := conn.DriverName(ctx)
	if err != nil {
		return err
	}
	csiMetrics.SetDriverName(driver)
	caps, err := capabilities(ctx, conn)
	if err != nil {
		return err
	}
	logger = logger.WithValues("driver", driver)
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Connected to the CSI driver", "capabilities", fmt.Sprintf("%+v", caps))

	nodeName := ""
	if cfg.NodeDeployment {
		if nodeName = os.Getenv("NODE_NAME"); nodeName == "" {
			return errors.New("--node-deployment needs the NODE_NAME environment variable")
		}
	}

	// The lease gets a client of its own, so a throttled main client cannot starve renewals.
	leaseClient, err := kubernetes.NewForConfig(kubeclient.ForCore(restCfg))
	if err != nil {
		return fmt.Errorf("lease client: %w", err)
	}
	elector, err := leaderelection.New(leaderelection.Config{
		Enabled:       cfg.Common.LeaderElection,
		Client:        leaseClient,
		LockName:      leaderelection.LockName("", driver),
		Namespace:     leaderelection.ResolveNamespace(cfg.Common.LeaderElectionNamespace, leaderelection.ServiceAccountNamespaceFile),
		Labels:        cfg.Common.LeaderElectionLabels,
		LeaseDuration: cfg.Common.LeaderElectionLeaseDuration,
		RenewDeadline: cfg.Common.LeaderElectionRenewDeadline,
		RetryPeriod:   cfg.Common.LeaderElectionRetryPeriod,
		ReleaseOnExit: cfg.Common.FeatureGates.Enabled(flags.ReleaseLeaderElectionOnExit),
		Registerer:    reg.Registerer(),
	})
	if err != nil {
		return err
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	serveCtx, stopServe := context.WithCancel(ctx)
	defer stopServe()
	if ep := cfg.Common.Endpoint(); ep != "" {
		srv, err := httpserver.Listen(ep)
		if err != nil {
			return err
		}
		srv.Handle(cfg.Common.MetricsPath, reg.Handler())
		srv.HandleCheck(leaderelection.HealthzPath, elector.Check)
		if cfg.EnablePprof {
			srv.Handle("/debug/pprof/", http.HandlerFunc(pprof.Index))
			srv.Handle("/debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
			srv.Handle("/debug/pprof/profile", http.HandlerFunc(pprof.Profile))
			srv.Handle("/debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
			srv.Handle("/debug/pprof/trace", http.HandlerFunc(pprof.Trace))
		}
		wg.Go(func() {
			if err := srv.Serve(serveCtx); err != nil {
				logger.Error(err, "HTTP endpoint failed")
			}
		})
	}

	return elector.Run(ctx, func(ctx context.Context) error {
		return lead(ctx, cfg, leaderDeps{
			kube: kube, snaps: snaps, restCfg: restCfg, conn: conn, driver: driver, caps: caps,
			nodeName: nodeName, reg: reg,
		})
	})
}

type leaderDeps struct {
	kube     kubernetes.Interface
	snaps    snapclient.Interface
	restCfg  *rest.Config
	conn     *csiconn.Conn
	driver   string
	caps     provision.Capabilities
	nodeName string
	reg      *sharedmetrics.Registry
}

// lead runs the controllers while this replica leads.
func lead(ctx context.Context, cfg *Config, d leaderDeps) error {
	logger := klog.FromContext(ctx)
	factory := informers.NewSharedInformerFactory(d.kube, 0)
	claimInf := factory.Core().V1().PersistentVolumeClaims()
	volumeInf := factory.Core().V1().PersistentVolumes()
	classInf := factory.Storage().V1().StorageClasses()
	vaInf := factory.Storage().V1().VolumeAttachments()
	csiNodeInf := factory.Storage().V1().CSINodes()
	nodeInf := factory.Core().V1().Nodes()
	// Nodes and CSINodes are cached only for topology (and capacity); only Node labels are read, so dropping
	// status and managed fields keeps that cache small on big clusters.
	var (
		csiNodeLister storagelisters.CSINodeLister
		nodeLister    corelisters.NodeLister
	)
	if d.caps.Topology {
		if err := nodeInf.Informer().SetTransform(func(o any) (any, error) {
			if n, ok := o.(*v1.Node); ok {
				n.Status = v1.NodeStatus{}
				n.ManagedFields = nil
			}
			return o, nil
		}); err != nil {
			return fmt.Errorf("node informer transform: %w", err)
		}
		csiNodeLister, nodeLister = csiNodeInf.Lister(), nodeInf.Lister()
	}
	for _, inf := range []cache.SharedIndexInformer{claimInf.Informer(), volumeInf.Informer()} {
		if err := inf.SetTransform(stripManagedFields); err != nil {
			return fmt.Errorf("informer transform: %w", err)
		}
	}
	var vacLister storagelisters.VolumeAttributesClassLister
	if hasResource(d.kube, "storage.k8s.io/v1", "volumeattributesclasses") {
		vacLister = factory.Storage().V1().VolumeAttributesClasses().Lister()
	}

	// Events get a client (and rate limiter) of their own with the same limits, so a burst of Events never
	// delays the writes that provision volumes, and the reverse.
	eventClient, err := kubernetes.NewForConfig(kubeclient.ForCore(d.restCfg))
	if err != nil {
		return fmt.Errorf("event client: %w", err)
	}
	// Upstream's Event source is "<driver>_<host>", not the binary name.
	host, _ := os.Hostname()
	recorder, err := events.New(ctx, eventClient, events.Options{Component: d.driver + "_" + strings.ReplaceAll(host, "_", "-")})
	if err != nil {
		return err
	}
	defer recorder.Shutdown()

	p := provision.New(provision.Config{
		DriverName:                     d.driver,
		Identity:                       fmt.Sprintf("%d-%d-%s", time.Now().UnixMilli(), rand.IntN(10000), d.driver),
		VolumeNamePrefix:               cfg.VolumeNamePrefix,
		VolumeNameUUIDLength:           cfg.VolumeNameUUIDLength,
		Timeout:                        cfg.Common.Timeout,
		StrictTopology:                 cfg.StrictTopology,
		ImmediateTopology:              cfg.ImmediateTopology,
		ExtraCreateMetadata:            cfg.ExtraCreateMetadata,
		DefaultFSType:                  cfg.DefaultFSType,
		ControllerPublishReadOnly:      cfg.ControllerPublishReadOnly,
		PreventVolumeModeConversion:    cfg.PreventVolumeModeConversion,
		NodeName:                       d.nodeName,
		NodeDeploymentImmediateBinding: cfg.NodeDeploymentImmediateBinding,
		Capabilities:                   d.caps,
	}, provision.Deps{
		Kube: d.kube, Snapshots: d.snaps, CSI: csi.NewControllerClient(d.conn.GRPC()),
		Claims: claimInf.Lister(), Volumes: volumeInf.Lister(), Classes: classInf.Lister(),
		CSINodes: csiNodeLister, Nodes: nodeLister, Attachments: vaInf.Lister(),
		AttrClasses: vacLister, Recorder: recorder, Metrics: metrics.New(d.reg.Registerer()),
	})

	qm, err := workqueue.NewMetrics(d.reg.Registerer())
	if err != nil {
		return err
	}
	var queues controller.Queues
	for name, q := range map[string]*workqueue.Queue[string]{"claims": &queues.Claims, "volumes": &queues.Volumes, "clone-sources": &queues.CloneSources} {
		if *q, err = workqueue.New[string](qm, workqueue.Config{Name: name, RetryIntervalStart: cfg.Common.RetryIntervalStart, RetryIntervalMax: cfg.Common.RetryIntervalMax}); err != nil {
			return err
		}
	}
	ctrl, err := controller.New(controller.Config{
		Workers: cfg.Common.WorkerThreads, CloneWorkers: cfg.CloningProtectionThreads, SlowRetry: cfg.Common.RetryIntervalMax,
	}, p, controller.Informers{
		Claims: claimInf.Informer(), Volumes: volumeInf.Informer(), Classes: classInf.Informer(), Attachments: vaInf.Informer(),
	}, queues)
	if err != nil {
		return err
	}
	var capCtrl *capacity.Controller
	if cfg.EnableCapacity {
		if capCtrl, err = newCapacity(ctx, cfg, d, factory, qm); err != nil {
			return err
		}
	}

	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer cache for %v did not sync", typ)
		}
	}
	logger.Info("Caches synced, provisioning")
	var wg sync.WaitGroup
	if capCtrl != nil {
		wg.Go(func() { capCtrl.Run(ctx, cfg.CapacityThreads) })
	}
	ctrl.Run(ctx)
	wg.Wait()
	return nil
}

// capabilities reads the driver capabilities the provisioner acts on. A driver without a controller service or
// CREATE_DELETE_VOLUME cannot be provisioned for, which upstream also treats as fatal.
func capabilities(ctx context.Context, conn *csiconn.Conn) (provision.Capabilities, error) {
	plugin, err := conn.PluginCapabilities(ctx)
	if err != nil {
		return provision.Capabilities{}, err
	}
	if !plugin.Has(csi.PluginCapability_Service_CONTROLLER_SERVICE) {
		return provision.Capabilities{}, errors.New("the CSI driver has no controller service")
	}
	ctrl, err := conn.ControllerCapabilities(ctx)
	if err != nil {
		return provision.Capabilities{}, err
	}
	if !ctrl.Has(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME) {
		return provision.Capabilities{}, errors.New("the CSI driver lacks CREATE_DELETE_VOLUME")
	}
	return provision.Capabilities{
		Topology:              plugin.Has(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		Clone:                 ctrl.Has(csi.ControllerServiceCapability_RPC_CLONE_VOLUME),
		Snapshot:              ctrl.Has(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT),
		SingleNodeMultiWriter: ctrl.Has(csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER),
		ModifyVolume:          ctrl.Has(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME),
		GetCapacity:           ctrl.Has(csi.ControllerServiceCapability_RPC_GET_CAPACITY),
	}, nil
}

// restConfig loads the client configuration through shared/kubeclient. Only upstream's provisioner has --master,
// and kubeclient.Options has no field for it, so a --master URL is loaded here with clientcmd, as upstream does.
func restConfig(cfg *Config) (*rest.Config, error) {
	o := kubeclient.Options{Kubeconfig: cfg.Common.Kubeconfig, QPS: float32(cfg.Common.KubeAPIQPS),
		Burst: cfg.Common.KubeAPIBurst, UserAgent: version.UserAgent(binary)}
	if cfg.Master == "" {
		return kubeclient.RESTConfig(o)
	}
	c, err := clientcmd.BuildConfigFromFlags(cfg.Master, o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading --master %q (--kubeconfig %q): %w", cfg.Master, o.Kubeconfig, err)
	}
	c.QPS, c.Burst, c.UserAgent = o.QPS, o.Burst, o.UserAgent
	return c, nil
}

// hasResource reports whether the API server serves resource in groupVersion.
func hasResource(kube kubernetes.Interface, groupVersion, resource string) bool {
	list, err := kube.Discovery().ServerResourcesForGroupVersion(groupVersion)
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == resource {
			return true
		}
	}
	return false
}

// stripManagedFields drops managedFields from cached objects: the provisioner never reads them, and they are
// a large share of a PVC's or PV's size in memory.
func stripManagedFields(o any) (any, error) {
	if m, ok := o.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return o, nil
}
