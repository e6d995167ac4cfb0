// Package app is the attacher proper, run by shared/sidecar once the driver is ready and this replica
// leads: it picks the handler from the driver's capabilities and runs the controller.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-lib-utils/connection"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/attacher/internal/controller"
	"github.com/stowage-csi/stowage/attacher/internal/csiattach"
	"github.com/stowage-csi/stowage/attacher/internal/handler"
	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/flags"
	"github.com/stowage-csi/stowage/shared/kubeclient"
	"github.com/stowage-csi/stowage/shared/sidecar"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

// Upstream's defaults for the attacher's flags, and its lease name prefix.
const (
	Binary               = "csi-attacher"
	LockPrefix           = "external-attacher-leader-"
	DefaultTimeout       = 15 * time.Second
	DefaultWorkerThreads = 10
	DefaultResync        = 10 * time.Minute
	DefaultReconcileSync = time.Minute
)

// MutableCSINodeAllocatableCount is upstream's attacher gate (GA, on) that writes the CSI error's gRPC code to
// status.attachError.errorCode, which the scheduler's volume limit logic reads; honoured: =false leaves it out.
const MutableCSINodeAllocatableCount featuregate.Feature = "MutableCSINodeAllocatableCount"

// Defaults are the standard flags' per-sidecar defaults and the gates upstream's attacher registers besides
// the common ones (shared/flags adds ReleaseLeaderElectionOnExit and the logging gates).
var Defaults = flags.Defaults{Timeout: DefaultTimeout, WorkerThreads: DefaultWorkerThreads, Gates: []flags.Gate{
	{Name: MutableCSINodeAllocatableCount, Spec: featuregate.FeatureSpec{Default: true, PreRelease: featuregate.GA}},
}}

// Config holds the attacher's own flags (the standard ones are in sidecar.Env.Flags).
type Config struct {
	Resync           time.Duration
	MaxEntries       int
	DefaultFSType    string
	ReconcileSync    time.Duration
	MaxGRPCLogLength int
}

// AddFlags registers the attacher's own flags with upstream's names and defaults.
func (c *Config) AddFlags(fs *flag.FlagSet, _ *flags.Common) {
	fs.DurationVar(&c.Resync, "resync", DefaultResync, "Resync interval of the controller.")
	fs.IntVar(&c.MaxEntries, "max-entries", 0, "Page size of ListVolumes calls in the reconcile; 0 lets the driver choose.")
	fs.StringVar(&c.DefaultFSType, "default-fstype", "", "The default filesystem type of the volume to publish. Defaults to empty string.")
	fs.DurationVar(&c.ReconcileSync, "reconcile-sync", DefaultReconcileSync, "Resync interval of the VolumeAttachment reconciler (ListVolumes).")
	fs.IntVar(&c.MaxGRPCLogLength, "max-grpc-log-length", -1, "The maximum amount of characters logged for every gRPC response. Defaults to no limit.")
}

// Validate checks the attacher's own flags.
func (c *Config) Validate() error {
	var errs []error
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

// Options are what main passes to sidecar.Main: upstream's flags and defaults, and the "migrated" label on CSI
// call metrics.
func (c *Config) Options(args []string) sidecar.Options {
	return sidecar.Options{
		Binary:     Binary,
		Defaults:   Defaults,
		LockPrefix: LockPrefix,
		Args:       args,
		AddFlags:   c.AddFlags,
		Validate:   c.Validate,
		Migration:  true,
	}
}

// Run runs the attacher, configured by the flags sidecar.Main parsed into c, until ctx ends and returns once
// the workers have drained.
func (c *Config) Run(ctx context.Context, env *sidecar.Env) error {
	logger := klog.FromContext(ctx)
	connection.SetMaxGRPCLogLength(c.MaxGRPCLogLength)
	driver := env.DriverName
	publishes, caps := capabilities(env.PluginCaps, env.ControllerCaps)

	factory := kubeclient.NewInformerFactory(env.Clients.Kube, c.Resync)
	hcfg := handler.Config{
		Driver:        driver,
		Client:        env.Clients.Kube,
		PVLister:      factory.Core().V1().PersistentVolumes().Lister(),
		CSINodeLister: factory.Storage().V1().CSINodes().Lister(),
		VALister:      factory.Storage().V1().VolumeAttachments().Lister(),
		CSI:           csiattach.New(csi.NewControllerClient(env.CSI.GRPC()), env.Flags.Timeout, int32(c.MaxEntries)),
		Capabilities:  caps,
		DefaultFSType: c.DefaultFSType,
		OmitErrorCode: !env.Flags.FeatureGates.Enabled(MutableCSINodeAllocatableCount),
	}
	// The handler is chosen once: the workers' hot path has no capability checks.
	var h controller.Handler
	reconcileSync := time.Duration(0)
	if publishes {
		logger.Info("Driver supports ControllerPublishVolume, using the CSI handler", "capabilities", caps)
		h = handler.NewCSI(hcfg)
		if caps.ListPublishedNodes {
			reconcileSync = c.ReconcileSync
		}
	} else {
		logger.Info("Driver does not support ControllerPublishVolume, using the trivial handler")
		h = handler.NewTrivial(hcfg)
	}

	vaQueue, err := workqueue.New[string](env.Queues, env.QueueConfig("csi-attacher-va"))
	if err != nil {
		return err
	}
	pvQueue, err := workqueue.New[string](env.Queues, env.QueueConfig("csi-attacher-pv"))
	if err != nil {
		return err
	}
	ctrl, err := controller.New(controller.Config{
		Driver:        driver,
		Finalizer:     handler.FinalizerName(driver),
		Handler:       h,
		VAInformer:    factory.Storage().V1().VolumeAttachments(),
		PVInformer:    factory.Core().V1().PersistentVolumes(),
		VAQueue:       vaQueue,
		PVQueue:       pvQueue,
		Workers:       env.Flags.WorkerThreads,
		ReconcileSync: reconcileSync,
	})
	if err != nil {
		return err
	}
	// The CSINode informer only feeds the handler's lister.
	factory.Storage().V1().CSINodes().Informer()
	factory.Start(ctx.Done())
	kubeclient.LeanSync(ctx, factory)
	defer factory.Shutdown()
	// While this replica leads, a restart of the driver is followed instead of ending the process, and the
	// VolumeAttachments it interrupted are retried as soon as it is back.
	defer env.CSI.StartFollowingRestarts(ctx, ctrl.DriverBack)()
	return ctrl.Run(ctx)
}

// capabilities turns the driver's capabilities, learnt once at start-up, into the handler choice.
func capabilities(plugin csiconn.PluginCapabilities, ctrl csiconn.ControllerCapabilities) (bool, handler.Capabilities) {
	if !plugin.Has(csi.PluginCapability_Service_CONTROLLER_SERVICE) {
		return false, handler.Capabilities{}
	}
	return ctrl.Has(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME), handler.Capabilities{
		PublishReadOnly:       ctrl.Has(csi.ControllerServiceCapability_RPC_PUBLISH_READONLY),
		SingleNodeMultiWriter: ctrl.Has(csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER),
		ListPublishedNodes: ctrl.Has(csi.ControllerServiceCapability_RPC_LIST_VOLUMES) &&
			ctrl.Has(csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES),
	}
}
