// Package app is snapshot-controller's start-up: flags, clients, the CRD check, the metrics server, leader
// election on upstream's Lease, then the controller. It has no CSI connection: the controller is cluster-wide.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapscheme "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/scheme"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/automaxprocs/maxprocs"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/events"
	"github.com/stowage-csi/stowage/shared/flags"
	"github.com/stowage-csi/stowage/shared/httpserver"
	"github.com/stowage-csi/stowage/shared/kubeclient"
	"github.com/stowage-csi/stowage/shared/leaderelection"
	"github.com/stowage-csi/stowage/shared/version"
	"github.com/stowage-csi/stowage/shared/workqueue"
	"github.com/stowage-csi/stowage/snapshotter/internal/controller"
	"github.com/stowage-csi/stowage/snapshotter/internal/controller/opmetrics"
)

// Parse parses args into a Config. A nil Config with a nil error means there is nothing to run (--help, or
// --version printed to stdout).
func Parse(args []string, stdout io.Writer) (*Config, error) {
	fs, cfg, err := NewFlagSet()
	if err != nil {
		return nil, err
	}
	fs.SetOutput(stdout)
	if err := flags.ParseInterspersed(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil
		}
		return nil, err
	}
	cfg.Parsed(fs)
	if cfg.ShowVersion {
		return nil, version.Print(stdout, Binary)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Run runs the controller until ctx ends, under leader election if asked, and returns once its workers have
// drained (and the Lease is released).
func Run(ctx context.Context, cfg *Config) error {
	if err := logsapi.ValidateAndApply(cfg.Logging, cfg.FeatureGates); err != nil {
		return fmt.Errorf("setting up logging: %w", err)
	}
	logger := klog.FromContext(ctx)
	logger.Info("Starting", "binary", Binary, "version", version.Version)
	flags.WarnPositional(logger, cfg.Positional)
	if cfg.Automaxprocs {
		defer setMaxProcs(logger)()
	}
	if !cfg.FeatureGates.Enabled(CSIVolumeGroupSnapshot) {
		logger.V(2).Info("CSIVolumeGroupSnapshot is off")
	}
	clients, err := kubeclient.New(ctx, kubeclient.Options{Kubeconfig: cfg.Kubeconfig, QPS: qps(cfg.KubeAPIQPS),
		Burst: cfg.KubeAPIBurst, AdaptiveRate: !cfg.KubeAPIRateSet, UserAgent: version.UserAgent(Binary)})
	if err != nil {
		return err
	}
	snap, err := snapclient.NewForConfig(kubeclient.ForCRDs(clients.Config))
	if err != nil {
		return fmt.Errorf("creating the snapshot client: %w", err)
	}
	metrics, err := opmetrics.New()
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}

	var srv *httpserver.Server
	if cfg.HTTPEndpoint != "" {
		if srv, err = httpserver.Listen(cfg.HTTPEndpoint); err != nil {
			return err
		}
		srv.Handle(cfg.MetricsPath, metrics.Handler())
	}
	if err := waitForCRDs(ctx, snap, cfg.RetryCRDIntervalMax); err != nil {
		return fmt.Errorf("the VolumeSnapshot CRDs are not served: %w", err)
	}

	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), snapscheme.AddToScheme(scheme)); err != nil {
		return fmt.Errorf("building the Event scheme: %w", err)
	}
	// Events keep flowing while work drains; they stop when Run returns.
	eventsCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEvents()
	recorder, err := events.New(eventsCtx, clients.Kube, events.Options{Component: Binary, Scheme: scheme})
	if err != nil {
		return err
	}
	defer recorder.Shutdown()

	elector, err := newElector(cfg, clients)
	if err != nil {
		return err
	}
	if srv != nil {
		if cfg.LeaderElection {
			srv.HandleCheck(leaderelection.HealthzPath, elector.Check)
		}
		serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
		var serving sync.WaitGroup
		serving.Go(func() {
			if err := srv.Serve(serveCtx); err != nil {
				logger.Error(err, "HTTP endpoint failed")
			}
		})
		defer func() {
			stopServing()
			serving.Wait()
		}()
	}
	return elector.Run(ctx, func(ctx context.Context) error {
		return runController(ctx, cfg, clients, snap, metrics, recorder)
	})
}

// setMaxProcs sets GOMAXPROCS from the container's CPU quota (--automaxprocs) and returns what undoes it.
func setMaxProcs(logger klog.Logger) (undo func()) {
	undo, err := maxprocs.Set(maxprocs.Logger(func(format string, args ...any) { logger.Info(fmt.Sprintf(format, args...)) }))
	if err != nil {
		logger.Error(err, "Setting GOMAXPROCS from the CPU quota failed; keeping the default")
	}
	if undo == nil {
		return func() {}
	}
	return undo
}

// newElector returns the leader election of the --leader-election flags, under upstream's Lease name.
func newElector(cfg *Config, clients *kubeclient.Clients) (*leaderelection.Elector, error) {
	return leaderelection.New(leaderelection.Config{
		Enabled:       cfg.LeaderElection,
		Client:        clients.LeaderElection,
		LockName:      LockName,
		Namespace:     leaderelection.ResolveNamespace(cfg.LeaderElectionNamespace, leaderelection.ServiceAccountNamespaceFile),
		LeaseDuration: cfg.LeaderElectionLeaseDuration,
		RenewDeadline: cfg.LeaderElectionRenewDeadline,
		RetryPeriod:   cfg.LeaderElectionRetryPeriod,
		ReleaseOnExit: cfg.FeatureGates.Enabled(flags.ReleaseLeaderElectionOnExit),
	})
}

// runController starts the informers and the controller on the leader.
func runController(ctx context.Context, cfg *Config, clients *kubeclient.Clients, snap snapclient.Interface,
	metrics *opmetrics.Manager, recorder *events.Recorder) error {
	// Queue metrics are not served: upstream's snapshot-controller exposes only its operation metrics.
	queues, err := workqueue.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		return err
	}
	qcfg := func(name string) workqueue.Config {
		return workqueue.Config{Name: name, RetryIntervalStart: cfg.RetryIntervalStart, RetryIntervalMax: cfg.RetryIntervalMax}
	}
	snapQueue, err := workqueue.New[string](queues, qcfg(controller.SnapshotQueueName))
	if err != nil {
		return err
	}
	contentQueue, err := workqueue.New[string](queues, qcfg(controller.ContentQueueName))
	if err != nil {
		return err
	}
	snapFactory := snapinformers.NewSharedInformerFactoryWithOptions(snap, cfg.ResyncPeriod,
		snapinformers.WithTransform(kubeclient.StripManagedFields))
	coreFactory := kubeclient.NewInformerFactory(clients.Kube, cfg.ResyncPeriod)
	ccfg := controller.Config{
		Snap:                        snap,
		Kube:                        clients.Kube,
		Snapshots:                   snapFactory.Snapshot().V1().VolumeSnapshots(),
		Contents:                    snapFactory.Snapshot().V1().VolumeSnapshotContents(),
		Classes:                     snapFactory.Snapshot().V1().VolumeSnapshotClasses(),
		Claims:                      coreFactory.Core().V1().PersistentVolumeClaims(),
		SnapshotQueue:               snapQueue,
		ContentQueue:                contentQueue,
		Events:                      recorder,
		Metrics:                     metrics,
		Workers:                     cfg.WorkerThreads,
		PreventVolumeModeConversion: cfg.PreventVolumeModeConversion,
		DistributedSnapshotting:     cfg.EnableDistributedSnapshotting,
	}
	if cfg.EnableDistributedSnapshotting {
		ccfg.Nodes = coreFactory.Core().V1().Nodes()
	}
	if cfg.FeatureGates.Enabled(CSIVolumeGroupSnapshot) {
		if err := groupCRDsServed(ctx, snap); err != nil {
			// Upstream, too, only warns: single snapshots work without the group CRDs.
			klog.FromContext(ctx).Error(err, "The VolumeGroupSnapshot CRDs are not served; group snapshots are off")
		} else {
			gsQueue, err := workqueue.New[string](queues, qcfg(controller.GroupSnapshotQueueName))
			if err != nil {
				return err
			}
			gcQueue, err := workqueue.New[string](queues, qcfg(controller.GroupContentQueueName))
			if err != nil {
				return err
			}
			groups := snapFactory.Groupsnapshot().V1()
			ccfg.Groups = &controller.GroupConfig{
				Snapshots: groups.VolumeGroupSnapshots(), Contents: groups.VolumeGroupSnapshotContents(),
				Classes: groups.VolumeGroupSnapshotClasses(), SnapshotQueue: gsQueue, ContentQueue: gcQueue,
			}
		}
	}
	ctrl, err := controller.New(ccfg)
	if err != nil {
		return err
	}
	snapFactory.Start(ctx.Done())
	coreFactory.Start(ctx.Done())
	kubeclient.LeanSync(ctx, snapFactory, coreFactory)
	defer snapFactory.Shutdown()
	defer coreFactory.Shutdown()
	return ctrl.Run(ctx)
}

// qps maps --kube-api-qps to client-go, where a negative QPS means no client-side rate limiter.
func qps(v float64) float32 {
	if v < 0 {
		return -1
	}
	return float32(math.Min(v, math.MaxFloat32))
}

// waitForCRDs waits, with upstream's backoff (100 ms growing by 1.5x) for at most max (at least 1 s), until the
// three VolumeSnapshot CRDs are served.
func waitForCRDs(ctx context.Context, snap snapclient.Interface, max time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, max2(max, time.Second))
	defer cancel()
	opts := metav1.ListOptions{Limit: 1}
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 100 * time.Millisecond, Factor: 1.5, Steps: math.MaxInt32},
		func(ctx context.Context) (bool, error) {
			_, e1 := snap.SnapshotV1().VolumeSnapshots("").List(ctx, opts)
			_, e2 := snap.SnapshotV1().VolumeSnapshotClasses().List(ctx, opts)
			_, e3 := snap.SnapshotV1().VolumeSnapshotContents().List(ctx, opts)
			last = errors.Join(e1, e2, e3)
			if last != nil {
				klog.FromContext(ctx).Error(last, "Listing VolumeSnapshot CRDs failed, retrying")
			}
			return last == nil, nil
		})
	if err != nil && last != nil {
		return last
	}
	return err
}

// groupCRDsServed checks once that the three group snapshot CRDs are served.
func groupCRDsServed(ctx context.Context, snap snapclient.Interface) error {
	opts := metav1.ListOptions{Limit: 1}
	_, e1 := snap.GroupsnapshotV1().VolumeGroupSnapshots("").List(ctx, opts)
	_, e2 := snap.GroupsnapshotV1().VolumeGroupSnapshotContents().List(ctx, opts)
	_, e3 := snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().List(ctx, opts)
	return errors.Join(e1, e2, e3)
}

func max2(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}
