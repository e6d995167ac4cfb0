// Package app is csi-snapshotter proper, run by shared/sidecar once the driver is ready and this replica
// leads: it builds the snapshot clients and informers, the handler and the controller.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapscheme "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/scheme"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/flags"
	"github.com/stowage-csi/stowage/shared/kubeclient"
	"github.com/stowage-csi/stowage/shared/sidecar"
	"github.com/stowage-csi/stowage/shared/workqueue"
	"github.com/stowage-csi/stowage/snapshotter/internal/sidecar/controller"
	"github.com/stowage-csi/stowage/snapshotter/internal/sidecar/csisnap"
	"github.com/stowage-csi/stowage/snapshotter/internal/sidecar/handler"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// Upstream's name, lease prefix and defaults for csi-snapshotter.
const (
	Binary               = "csi-snapshotter"
	LockPrefix           = "external-snapshotter-leader-"
	DefaultTimeout       = time.Minute
	DefaultWorkerThreads = 10
	DefaultResync        = 15 * time.Minute
	ContentQueue         = "csi-snapshotter-content"
	// NodeNameEnv names the node a --node-deployment instance serves.
	NodeNameEnv = "NODE_NAME"
)

// CSIVolumeGroupSnapshot is upstream's gate (GA and on in v8, as snapshot-controller's) for
// VolumeGroupSnapshotContents: with a driver that has the GroupController service and the group CRDs served,
// csi-snapshotter also serves its group contents; without either it only warns, as upstream does.
const CSIVolumeGroupSnapshot featuregate.Feature = "CSIVolumeGroupSnapshot"

// GroupContentQueue is upstream's queue of VolumeGroupSnapshotContents; groupVersion is the group API served.
const (
	GroupContentQueue = "csi-snapshotter-groupsnapshotcontent"
	groupVersion      = "groupsnapshot.storage.k8s.io/v1"
)

// Defaults are the standard flags' csi-snapshotter defaults and the gate upstream registers besides the
// common ones.
var Defaults = flags.Defaults{Timeout: DefaultTimeout, WorkerThreads: DefaultWorkerThreads, Gates: []flags.Gate{{
	Name: CSIVolumeGroupSnapshot, Spec: featuregate.FeatureSpec{Default: true, PreRelease: featuregate.GA},
}}}

// Config holds csi-snapshotter's own flags (the standard ones are in sidecar.Env.Flags).
type Config struct {
	Resync                      time.Duration
	SnapshotNamePrefix          string
	SnapshotNameUUIDLength      int
	ExtraCreateMetadata         bool
	NodeDeployment              bool
	GroupSnapshotNamePrefix     string
	GroupSnapshotNameUUIDLength int

	common *flags.Common
	// nodeName is $NODE_NAME, read by Validate for --node-deployment.
	nodeName string
}

// AddFlags registers csi-snapshotter's own flags with upstream's names and defaults.
func (c *Config) AddFlags(fs *flag.FlagSet, common *flags.Common) {
	c.common = common
	fs.DurationVar(&c.Resync, "resync-period", DefaultResync, "Resync interval of the controller.")
	fs.StringVar(&c.SnapshotNamePrefix, "snapshot-name-prefix", "snapshot", "Prefix to apply to the name of a created snapshot")
	fs.IntVar(&c.SnapshotNameUUIDLength, "snapshot-name-uuid-length", -1, "Length in characters for the generated uuid of a created snapshot. Defaults behavior is to NOT truncate.")
	fs.BoolVar(&c.ExtraCreateMetadata, "extra-create-metadata", false, "If set, add snapshot metadata to plugin snapshot requests as parameters.")
	fs.BoolVar(&c.NodeDeployment, "node-deployment", false, "Enables deploying the sidecar controller together with a CSI driver on nodes to manage snapshots for node-local volumes.")
	fs.StringVar(&c.GroupSnapshotNamePrefix, "groupsnapshot-name-prefix", "groupsnapshot", "Prefix to apply to the name of a created group snapshot")
	fs.IntVar(&c.GroupSnapshotNameUUIDLength, "groupsnapshot-name-uuid-length", -1, "Length in characters for the generated uuid of a created group snapshot. Defaults behavior is to NOT truncate.")
}

// Validate checks csi-snapshotter's own flags.
func (c *Config) Validate() error {
	var errs []error
	if c.SnapshotNamePrefix == "" {
		errs = append(errs, errors.New("--snapshot-name-prefix must not be empty"))
	}
	if c.GroupSnapshotNamePrefix == "" {
		errs = append(errs, errors.New("--groupsnapshot-name-prefix must not be empty"))
	}
	if c.SnapshotNameUUIDLength < -1 {
		errs = append(errs, fmt.Errorf("--snapshot-name-uuid-length must be -1 (whole UID) or a length, got %d", c.SnapshotNameUUIDLength))
	}
	if c.GroupSnapshotNameUUIDLength < -1 {
		errs = append(errs, fmt.Errorf("--groupsnapshot-name-uuid-length must be -1 (whole UID) or a length, got %d", c.GroupSnapshotNameUUIDLength))
	}
	if c.Resync < 0 {
		errs = append(errs, fmt.Errorf("--resync-period must not be negative, got %s", c.Resync))
	}
	if c.NodeDeployment {
		c.nodeName = os.Getenv(NodeNameEnv)
		if c.nodeName == "" {
			errs = append(errs, fmt.Errorf("--node-deployment needs the %s environment variable", NodeNameEnv))
		}
		// Each node's instance serves its own node's contents; electing one leader among them would leave
		// every other node unserved.
		if c.common != nil && c.common.LeaderElection {
			errs = append(errs, errors.New("--node-deployment cannot be combined with --leader-election"))
		}
	}
	return errors.Join(errs...)
}

// EventScheme knows the snapshot types, so Events can be recorded on VolumeSnapshotContents.
func EventScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := snapscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Prepare refuses a driver that cannot take snapshots, on standbys too, as upstream does at start-up.
func Prepare(_ context.Context, env *sidecar.Env) error {
	if !env.ControllerCaps.Has(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT) {
		return fmt.Errorf("CSI driver %s does not support CreateSnapshot (controller capability CREATE_DELETE_SNAPSHOT)", env.DriverName)
	}
	return nil
}

// Run runs csi-snapshotter until ctx ends and returns once the workers have drained.
func Run(ctx context.Context, env *sidecar.Env, cfg Config) error {
	client, err := snapclient.NewForConfig(kubeclient.ForCRDs(env.Clients.Config))
	if err != nil {
		return fmt.Errorf("creating the snapshot client: %w", err)
	}
	// Classes come from a factory of their own: with --node-deployment the contents' factory lists only
	// this node's contents, and classes carry no such label.
	var opts []snapinformers.SharedInformerOption
	if cfg.NodeDeployment {
		// Distributed snapshotting: the snapshot controller labels each content with the node that serves it.
		selector := labels.Set{snapapi.LabelManagedBy: cfg.nodeName}.String()
		opts = append(opts, snapinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
		klog.FromContext(ctx).Info("Node deployment: serving this node's contents only", "node", cfg.nodeName)
	}
	factory := snapinformers.NewSharedInformerFactoryWithOptions(client, cfg.Resync, opts...)
	classFactory := snapinformers.NewSharedInformerFactory(client, cfg.Resync)
	contents := factory.Snapshot().V1().VolumeSnapshotContents()
	classes := classFactory.Snapshot().V1().VolumeSnapshotClasses()

	h := handler.New(handler.Config{
		Common:        handlerCommon(env, client, cfg, cfg.SnapshotNamePrefix, cfg.SnapshotNameUUIDLength),
		ClassLister:   classes.Lister(),
		CSI:           csisnap.New(csi.NewControllerClient(env.CSI.GRPC()), env.Flags.Timeout),
		ListSnapshots: env.ControllerCaps.Has(csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS),
	})
	queue, err := workqueue.New[string](env.Queues, env.QueueConfig(ContentQueue))
	if err != nil {
		return err
	}
	ctrl, err := controller.New(controller.Config{
		Driver: env.DriverName, Handler: h, Contents: contents, Classes: classes,
		Queue: queue, Workers: env.Flags.WorkerThreads,
	})
	if err != nil {
		return err
	}
	groupCtrl, err := groupController(ctx, env, cfg, client, factory, classFactory)
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	classFactory.Start(ctx.Done())
	defer classFactory.Shutdown()
	kubeclient.LeanSync(ctx, factory, classFactory)
	// While this replica leads (or, with --node-deployment, serves its node), a restart of the driver is
	// followed instead of ending the process, and the contents it interrupted are retried as soon as it is back.
	driverBack := ctrl.DriverBack
	if groupCtrl != nil {
		driverBack = func(ctx context.Context) {
			ctrl.DriverBack(ctx)
			groupCtrl.DriverBack(ctx)
		}
	}
	defer env.CSI.StartFollowingRestarts(ctx, driverBack)()
	if groupCtrl == nil {
		return ctrl.Run(ctx)
	}
	var wg sync.WaitGroup
	var groupErr error
	wg.Go(func() { groupErr = groupCtrl.Run(ctx) })
	err = ctrl.Run(ctx)
	wg.Wait()
	return errors.Join(err, groupErr)
}

// groupController builds the VolumeGroupSnapshotContent controller when the gate is on, the driver can take
// group snapshots and the API server serves the group CRDs; otherwise it says why not and returns nil, as
// upstream only warns.
func groupController(ctx context.Context, env *sidecar.Env, cfg Config, client snapclient.Interface, factory, classFactory snapinformers.SharedInformerFactory) (*controller.GroupController, error) {
	logger := klog.FromContext(ctx)
	if !env.Flags.FeatureGates.Enabled(CSIVolumeGroupSnapshot) {
		return nil, nil
	}
	if !env.PluginCaps.Has(csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE) {
		logger.Info("Warning: CSIVolumeGroupSnapshot is on but the driver has no GroupController service; group snapshots are not served")
		return nil, nil
	}
	caps, err := env.CSI.GroupControllerCapabilities(ctx)
	if err != nil {
		return nil, err
	}
	if !caps.Has(csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT) {
		logger.Info("Warning: CSIVolumeGroupSnapshot is on but the driver lacks CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT; group snapshots are not served")
		return nil, nil
	}
	if _, err := client.Discovery().ServerResourcesForGroupVersion(groupVersion); err != nil {
		if apierrors.IsNotFound(err) {
			logger.Info("Warning: CSIVolumeGroupSnapshot is on but the API server does not serve " + groupVersion + " (are the group snapshot CRDs installed?); group snapshots are not served")
			return nil, nil
		}
		return nil, fmt.Errorf("discovering %s: %w", groupVersion, err)
	}
	contents := factory.Groupsnapshot().V1().VolumeGroupSnapshotContents()
	classes := classFactory.Groupsnapshot().V1().VolumeGroupSnapshotClasses()
	h := handler.NewGroup(handler.GroupConfig{
		Common:      handlerCommon(env, client, cfg, cfg.GroupSnapshotNamePrefix, cfg.GroupSnapshotNameUUIDLength),
		ClassLister: classes.Lister(),
		CSI:         csisnap.NewGroup(csi.NewGroupControllerClient(env.CSI.GRPC()), env.Flags.Timeout),
	})
	queue, err := workqueue.New[string](env.Queues, env.QueueConfig(GroupContentQueue))
	if err != nil {
		return nil, err
	}
	logger.Info("Serving VolumeGroupSnapshotContents")
	return controller.NewGroup(controller.GroupConfig{
		Driver: env.DriverName, Handler: h, Contents: contents, Classes: classes,
		Queue: queue, Workers: env.Flags.WorkerThreads,
	})
}

// handlerCommon are the settings the snapshot and group handlers share, with the name prefix and UUID length
// of the kind at hand.
func handlerCommon(env *sidecar.Env, client snapclient.Interface, cfg Config, prefix string, uuidLength int) handler.Common {
	return handler.Common{
		Driver:              env.DriverName,
		Kube:                env.Clients.Kube,
		Client:              client,
		NamePrefix:          prefix,
		NameUUIDLength:      uuidLength,
		ExtraCreateMetadata: cfg.ExtraCreateMetadata,
		Events:              env.Events,
		PollInterval:        env.Flags.RetryIntervalStart,
	}
}
