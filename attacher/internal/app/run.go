// Package app runs the attacher: it connects to the CSI driver, picks the handler from the driver's
// capabilities, serves metrics and health, takes part in leader election and runs the controller.
package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-lib-utils/connection"
	csimetrics "github.com/kubernetes-csi/csi-lib-utils/metrics"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/attacher/internal/controller"
	"github.com/stowage-csi/stowage/attacher/internal/csiattach"
	"github.com/stowage-csi/stowage/attacher/internal/handler"
	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/flags"
	"github.com/stowage-csi/stowage/shared/httpserver"
	"github.com/stowage-csi/stowage/shared/leaderelection"
	"github.com/stowage-csi/stowage/shared/metrics"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

// Config is the attacher's command line.
type Config struct {
	Common           *flags.Common
	Resync           time.Duration
	MaxEntries       int
	DefaultFSType    string
	ReconcileSync    time.Duration
	MaxGRPCLogLength int
}

// Upstream's defaults for the attacher's own flags, and Stowage's for the shared ones it sets.
const (
	DefaultTimeout       = 15 * time.Second
	DefaultWorkerThreads = 10
	DefaultResync        = 10 * time.Minute
	DefaultReconcileSync = time.Minute
	leasePrefix          = "external-attacher-leader-"
)

// Validate checks the attacher's own flags.
func (c *Config) Validate() error {
	var errs []error
	if err := c.Common.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxEntries < 0 || c.MaxEntries > 1<<31-1 {
		errs = append(errs, fmt.Errorf("--max-entries must be between 0 and 2147483647, got %d", c.MaxEntries))
	}
	if c.Resync < 0 {
		errs = append(errs, fmt.Errorf("--resync must not be negative, got %s", c.Resync))
	}
	if c.ReconcileSync < 0 {
		errs = append(errs, fmt.Errorf("--reconcile-sync must not be negative, got %s", c.ReconcileSync))
	}
	return errors.Join(errs...)
}

// Run runs the attacher until ctx ends; on a graceful stop it drains the workers and releases the lease.
func Run(ctx context.Context, cfg Config) error {
	logger := klog.FromContext(ctx)
	common := cfg.Common
	connection.SetMaxGRPCLogLength(cfg.MaxGRPCLogLength)

	restConfig, err := restConfig(common)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("creating Kubernetes client: %w", err)
	}
	// Lease renewals get their own client, so a busy work queue's rate limit cannot starve them.
	leClient, err := kubernetes.NewForConfig(rest.CopyConfig(restConfig))
	if err != nil {
		return fmt.Errorf("creating leader election client: %w", err)
	}

	registry := metrics.NewRegistry()
	csiMetrics := csimetrics.NewCSIMetricsManagerWithOptions("",
		csimetrics.WithMigration(),
		csimetrics.WithProcessStartTime(false),
		csimetrics.WithCustomRegistry(registry.Kube()))
	conn, err := csiconn.Connect(ctx, csiconn.Options{Address: common.CSIAddress, Timeout: common.Timeout, Metrics: csiMetrics})
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if err := conn.ProbeUntilReady(ctx); err != nil {
		return err
	}
	driver, err := conn.DriverName(ctx)
	if err != nil {
		return err
	}
	csiMetrics.SetDriverName(driver)
	logger = logger.WithValues("driver", driver)
	ctx = klog.NewContext(ctx, logger)

	publishes, caps, err := driverCapabilities(ctx, conn)
	if err != nil {
		return err
	}

	factory := informers.NewSharedInformerFactory(client, cfg.Resync)
	hcfg := handler.Config{
		Driver:        driver,
		Client:        client,
		PVLister:      factory.Core().V1().PersistentVolumes().Lister(),
		CSINodeLister: factory.Storage().V1().CSINodes().Lister(),
		VALister:      factory.Storage().V1().VolumeAttachments().Lister(),
		CSI:           csiattach.New(csi.NewControllerClient(conn.GRPC()), common.Timeout, int32(cfg.MaxEntries)),
		Capabilities:  caps,
		DefaultFSType: cfg.DefaultFSType,
	}
	// The handler is chosen once: the workers' hot path has no capability checks.
	var h controller.Handler
	if publishes {
		logger.Info("Driver supports ControllerPublishVolume, using the CSI handler", "capabilities", caps)
		h = handler.NewCSI(hcfg)
	} else {
		logger.Info("Driver does not support ControllerPublishVolume, using the trivial handler")
		h = handler.NewTrivial(hcfg)
	}

	queueMetrics, err := workqueue.NewMetrics(registry.Registerer())
	if err != nil {
		return err
	}
	vaQueue, err := workqueue.New[string](queueMetrics, workqueue.Config{Name: "csi-attacher-va", RetryIntervalStart: common.RetryIntervalStart, RetryIntervalMax: common.RetryIntervalMax})
	if err != nil {
		return err
	}
	pvQueue, err := workqueue.New[string](queueMetrics, workqueue.Config{Name: "csi-attacher-pv", RetryIntervalStart: common.RetryIntervalStart, RetryIntervalMax: common.RetryIntervalMax})
	if err != nil {
		return err
	}
	reconcileSync := cfg.ReconcileSync
	if !publishes || !caps.ListPublishedNodes {
		reconcileSync = 0
	}
	ctrl, err := controller.New(controller.Config{
		Driver:        driver,
		Finalizer:     handler.FinalizerName(driver),
		Handler:       h,
		VAInformer:    factory.Storage().V1().VolumeAttachments(),
		PVInformer:    factory.Core().V1().PersistentVolumes(),
		VAQueue:       vaQueue,
		PVQueue:       pvQueue,
		Workers:       common.WorkerThreads,
		ReconcileSync: reconcileSync,
	})
	if err != nil {
		return err
	}
	// The CSINode informer feeds the handler's lister only.
	factory.Storage().V1().CSINodes().Informer()

	elector, err := leaderelection.New(leaderelection.Config{
		Enabled:       common.LeaderElection,
		Client:        leClient,
		LockName:      leaderelection.LockName(leasePrefix, driver),
		Namespace:     leaderelection.ResolveNamespace(common.LeaderElectionNamespace, leaderelection.ServiceAccountNamespaceFile),
		Labels:        common.LeaderElectionLabels,
		LeaseDuration: common.LeaderElectionLeaseDuration,
		RenewDeadline: common.LeaderElectionRenewDeadline,
		RetryPeriod:   common.LeaderElectionRetryPeriod,
		ReleaseOnExit: common.FeatureGates.Enabled(flags.ReleaseLeaderElectionOnExit),
		Registerer:    registry.Registerer(),
	})
	if err != nil {
		return err
	}

	group, gctx := errgroup.WithContext(ctx)
	if addr := common.Endpoint(); addr != "" {
		srv, err := httpserver.Listen(addr)
		if err != nil {
			return err
		}
		srv.Handle(common.MetricsPath, registry.Handler())
		if common.LeaderElection {
			srv.HandleCheck(leaderelection.HealthzPath, elector.Check)
		}
		group.Go(func() error { return srv.Serve(gctx) })
	}
	group.Go(func() error {
		err := elector.Run(gctx, func(workCtx context.Context) error {
			factory.Start(workCtx.Done())
			defer factory.Shutdown()
			return ctrl.Run(workCtx)
		})
		if err != nil {
			return err
		}
		// The work ended because ctx did; stop the HTTP server too.
		return ctx.Err()
	})
	if err := group.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	logger.Info("Stopped")
	return nil
}

// driverCapabilities asks the driver once, at start-up, what it supports; errors are not retried.
func driverCapabilities(ctx context.Context, conn *csiconn.Conn) (bool, handler.Capabilities, error) {
	plugin, err := conn.PluginCapabilities(ctx)
	if err != nil {
		return false, handler.Capabilities{}, err
	}
	if !plugin.Has(csi.PluginCapability_Service_CONTROLLER_SERVICE) {
		return false, handler.Capabilities{}, nil
	}
	ctrl, err := conn.ControllerCapabilities(ctx)
	if err != nil {
		return false, handler.Capabilities{}, err
	}
	return ctrl.Has(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME), handler.Capabilities{
		PublishReadOnly:       ctrl.Has(csi.ControllerServiceCapability_RPC_PUBLISH_READONLY),
		SingleNodeMultiWriter: ctrl.Has(csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER),
		ListPublishedNodes: ctrl.Has(csi.ControllerServiceCapability_RPC_LIST_VOLUMES) &&
			ctrl.Has(csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES),
	}, nil
}

// restConfig reads --kubeconfig (in-cluster configuration when empty) and applies the rate limits.
// Core clients speak protobuf, as upstream's do.
func restConfig(c *flags.Common) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if c.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("loading Kubernetes client configuration: %w", err)
	}
	cfg.QPS = float32(c.KubeAPIQPS)
	cfg.Burst = c.KubeAPIBurst
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = "csi-attacher (stowage)"
	return cfg, nil
}
