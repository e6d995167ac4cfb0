// Package app wires s3-controller together: clients, the controller-runtime manager with upstream's leader
// election Lease, the cache indexes, the reconciler, the stale cleaner, metrics and health endpoints.
package app

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/stowage-csi/stowage/s3-controller/internal/config"
	"github.com/stowage-csi/stowage/s3-controller/internal/csicontroller"
	"github.com/stowage-csi/stowage/s3-controller/internal/reconciler"
	"github.com/stowage-csi/stowage/shared/s3api"
	"github.com/stowage-csi/stowage/shared/version"
)

// Run starts the controller and blocks until ctx ends (or the Lease is lost, which is an error).
func Run(ctx context.Context, cfg *config.Config) error {
	logger := klog.FromContext(ctx)
	ctrl.SetLogger(logger)
	cfg.MountpointPod.CSIDriverVersion = version.Version
	logger.Info("Starting", "version", version.Version, "mountpointNamespace", cfg.MountpointPod.Namespace,
		"mountpointVersion", cfg.MountpointPod.MountpointVersion, "image", cfg.MountpointPod.Image)
	if cfg.MountpointPod.HeadroomEnabled() {
		logger.Info("Headroom for Mountpoint Pods is on (experimental, as upstream): workloads gated with "+reconciler.GateReserveHeadroom+" get headroom Pods and are ungated; this needs patch on pods cluster-wide", "headroomImage", cfg.MountpointPod.HeadroomImage)
	}
	mgr, lock, err := newManager(cfg, logger)
	if err != nil {
		return err
	}
	if err := addControllers(ctx, mgr, cfg); err != nil {
		return err
	}
	if err := addChecks(mgr, lock, cfg); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// newManager builds the controller-runtime manager with the API types the controller reads and, with
// --leader-election, the Lease lock whose health the manager reports (nil without).
func newManager(cfg *config.Config, logger klog.Logger) (manager.Manager, *watchedLock, error) {
	restConfig, err := restConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := s3api.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	opts := manager.Options{
		Scheme:                 scheme,
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: cfg.MetricsAddress},
		HealthProbeBindAddress: cfg.HealthAddress,
	}
	var lock *watchedLock
	if cfg.LeaderElection {
		if lock, err = newLeaseLock(restConfig, cfg); err != nil {
			return nil, nil, err
		}
		opts.LeaderElection = true
		opts.LeaderElectionID = config.LeaseName
		opts.LeaderElectionResourceLockInterface = lock
		// Stowage releases the Lease on a graceful exit, so a standby takes over at once.
		opts.LeaderElectionReleaseOnCancel = true
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &cfg.LeaseDuration, &cfg.RenewDeadline, &cfg.RetryPeriod
	}
	mgr, err := manager.New(restConfig, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("create manager: %w", err)
	}
	return mgr, lock, nil
}

// addControllers adds the Mountpoint Pod reconciler, its stale-attachment cleaner and, with --csi-endpoint,
// the CSI controller service.
func addControllers(ctx context.Context, mgr manager.Manager, cfg *config.Config) error {
	if err := reconciler.RegisterIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	r := reconciler.New(reconciler.Options{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Config:   cfg.MountpointPod,
		Events:   mgr.GetEventRecorder(reconciler.Name),
		Metrics:  reconciler.NewMetrics(ctrlmetrics.Registry),
		StaleAge: cfg.StaleInterval,
	})
	if err := r.SetupWithManager(mgr, cfg.Workers); err != nil {
		return fmt.Errorf("set up controller: %w", err)
	}
	if err := mgr.Add(&reconciler.StaleCleaner{R: r, Interval: cfg.StaleInterval}); err != nil {
		return err
	}
	if cfg.CSIEndpoint != "" {
		return addCSIController(ctx, mgr, cfg)
	}
	return nil
}

// addChecks serves /healthz (and the leader election's health when there is a lock) and /readyz, ready once
// the informers' caches synced.
func addChecks(mgr manager.Manager, lock *watchedLock, cfg *config.Config) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if lock != nil {
		if err := mgr.AddHealthzCheck("leader-election", lock.check(mgr.Elected(), cfg.LeaseDuration)); err != nil {
			return err
		}
	}
	return mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	})
}

// addCSIController serves the CSI controller service for dynamic provisioning beside the reconciler.
func addCSIController(ctx context.Context, mgr manager.Manager, cfg *config.Config) error {
	client, err := csicontroller.NewS3Client(ctx, csicontroller.S3Config{
		EndpointURL: cfg.S3EndpointURL, Region: cfg.S3Region, ForcePathStyle: cfg.S3ForcePathStyle,
	})
	if err != nil {
		return err
	}
	return mgr.Add(csicontroller.New(csicontroller.Options{
		Endpoint: cfg.CSIEndpoint, Version: version.Version, S3: client, S3Endpoint: cfg.S3EndpointURL,
	}))
}

// restConfig reads --kubeconfig, else controller-runtime's usual places ($KUBECONFIG, in-cluster,
// ~/.kube/config). Without --kube-api-qps there is no client-side rate limiter: the API server's priority
// and fairness sets the pace (controller-runtime's own default).
func restConfig(cfg *config.Config) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = ctrlconfig.GetConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	rc.UserAgent = version.UserAgent("s3-controller")
	if cfg.KubeAPIQPS > 0 {
		rc.QPS, rc.Burst = float32(cfg.KubeAPIQPS), cfg.KubeAPIBurst
	} else {
		rc.QPS = -1
	}
	return rc, nil
}
