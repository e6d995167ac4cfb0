package app

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/resizer/internal/controller"
	"github.com/stowage-csi/stowage/resizer/internal/csiresize"
	"github.com/stowage-csi/stowage/resizer/internal/expand"
	"github.com/stowage-csi/stowage/resizer/internal/inuse"
	"github.com/stowage-csi/stowage/resizer/internal/modify"
	"github.com/stowage-csi/stowage/resizer/internal/slow"
	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/kubeclient"
	"github.com/stowage-csi/stowage/shared/sidecar"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

// vacFallbackEnv is upstream's switch (set in aws-ebs-csi-driver's manifest) for clusters without the
// VolumeAttributesClass v1 API: the resizer then runs as if the gate were off.
const vacFallbackEnv = "ENABLE_VAC_FALLBACK"

// Prepare refuses, on every replica, a driver the resizer cannot serve, as upstream does at start-up.
func Prepare(ctx context.Context, env *sidecar.Env) error {
	_, err := chooseResizer(ctx, env)
	return err
}

// Options are what main passes to sidecar.Main: upstream's flags and defaults, --master for the clients, the
// driver check on every replica (Prepare) and upstream's Event source, "external-resizer <driver>" where the
// other sidecars' is their binary's name.
func (c *Config) Options(args []string) sidecar.Options {
	return sidecar.Options{
		Binary:      Binary,
		EventSource: EventSource,
		Defaults:    Defaults,
		LockPrefix:  LockPrefix,
		Args:        args,
		AddFlags:    c.AddFlags,
		Validate:    c.Validate,
		Master:      func() string { return c.Master },
		Prepare:     Prepare,
		// Upstream's label set: migrated="false" on every call, as this resizer expands CSI volumes only.
		Migration: true,
	}
}

// Run runs the resizer, configured by the flags sidecar.Main parsed into c, until ctx ends and returns once
// the workers have drained.
func (c *Config) Run(ctx context.Context, env *sidecar.Env) error {
	driver := env.DriverName
	csiClient := csiresize.New(csi.NewControllerClient(env.CSI.GRPC()), env.Flags.Timeout)
	resizer, err := newResizer(ctx, env, csiClient)
	if err != nil {
		return err
	}
	modifies, err := modifies(ctx, env)
	if err != nil {
		return err
	}

	factory := kubeclient.NewInformerFactory(env.Clients.Kube, c.Resync)
	ccfg := controller.Config{
		Driver:      driver,
		PVCInformer: factory.Core().V1().PersistentVolumeClaims(),
		PVInformer:  factory.Core().V1().PersistentVolumes(),
		Workers:     env.Flags.WorkerThreads,
	}
	var ctrl *controller.Controller
	if resizer != nil {
		// The Pod cache requeues claims through the controller built below, which exists before the informers start.
		requeue := func(namespace, claim string) {
			if ctrl != nil {
				ctrl.Requeue(namespace, claim)
			}
		}
		if err := addExpand(env, *c, factory, resizer, requeue, &ccfg); err != nil {
			return err
		}
	}
	if modifies {
		if err := addModify(env, *c, factory, csiClient, &ccfg); err != nil {
			return err
		}
	}
	ctrl, err = controller.New(ccfg)
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	kubeclient.LeanSync(ctx, factory)
	defer factory.Shutdown()
	// While this replica leads, a restart of the driver is followed instead of ending the process, and the
	// expansions and modifications it interrupted are retried as soon as it is back.
	defer env.CSI.StartFollowingRestarts(ctx, ctrl.DriverBack)()
	return ctrl.Run(ctx)
}

// newResizer returns the resizer the driver's capabilities call for, or nil for a driver that only modifies.
func newResizer(ctx context.Context, env *sidecar.Env, csiClient *csiresize.Client) (expand.Resizer, error) {
	kind, err := chooseResizer(ctx, env)
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	switch kind {
	case expandNever:
		logger.Info("Driver supports neither controller nor node expansion, only ControllerModifyVolume: claims are modified, not expanded")
		return nil, nil
	case expandOnNode:
		logger.Info("Driver does not support ControllerExpandVolume, using the trivial resizer: the node expands volumes")
		return expand.Trivial{}, nil
	}
	logger.Info("Driver supports ControllerExpandVolume, using the CSI resizer")
	return expand.NewCSI(csiClient, env.Clients.Kube,
		env.ControllerCaps.Has(csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)), nil
}

// addModify adds the modification of claims to ccfg: the VolumeAttributesClass informer, the handler and its
// queue.
// addExpand wires the expand side into ccfg: the handler over resizer, its queue and, with
// --handle-volume-inuse-error, the Pod cache that tells it which claims are in use (only with the flag: upstream's
// Pod cache is its top memory complaint).
func addExpand(env *sidecar.Env, cfg Config, factory informers.SharedInformerFactory, resizer expand.Resizer,
	requeue func(namespace, claim string), ccfg *controller.Config) error {
	ecfg := expand.Config{
		Driver:           env.DriverName,
		Client:           env.Clients.Kube,
		PVLister:         factory.Core().V1().PersistentVolumes().Lister(),
		Resizer:          resizer,
		Events:           env.Events,
		AnnotateFsResize: env.Flags.FeatureGates.Enabled(AnnotateFsResize),
		Slow:             slow.New(env.Flags.RetryIntervalMax, nil),
	}
	if cfg.HandleVolumeInUseError {
		podInf := factory.Core().V1().Pods().Informer()
		pods, err := inuse.New(podInf, requeue)
		if err != nil {
			return err
		}
		ecfg.InUse = pods
		ccfg.Synced = []cache.InformerSynced{podInf.HasSynced}
	}
	ccfg.Expand = expand.New(ecfg)
	q, err := workqueue.New[string](env.Queues, env.QueueConfig(env.DriverName+"-pvc"))
	ccfg.ExpandQueue = q
	return err
}

func addModify(env *sidecar.Env, cfg Config, factory informers.SharedInformerFactory, csiClient *csiresize.Client, ccfg *controller.Config) error {
	ccfg.VACInformer = factory.Storage().V1().VolumeAttributesClasses()
	ccfg.Modify = modify.New(modify.Config{
		Driver:        env.DriverName,
		Client:        env.Clients.Kube,
		PVLister:      factory.Core().V1().PersistentVolumes().Lister(),
		VACLister:     ccfg.VACInformer.Lister(),
		CSI:           csiClient,
		Events:        env.Events,
		ExtraMetadata: cfg.ExtraModifyMetadata,
		Slow:          slow.New(env.Flags.RetryIntervalMax, nil),
	})
	// Upstream names both queues <driver>-pvc, so their metrics collide; this one has its own name.
	q, err := workqueue.New[string](env.Queues, env.QueueConfig(env.DriverName+"-pvc-modify"))
	ccfg.ModifyQueue = q
	return err
}

// expansion is who grows a driver's volumes.
type expansion int

const (
	// expandInController: ControllerExpandVolume, the CSI resizer.
	expandInController expansion = iota
	// expandOnNode: node-only expansion, the trivial resizer.
	expandOnNode
	// expandNever: a driver that only modifies volumes (MODIFY_VOLUME without any expansion); the resizer runs
	// its modify controller alone and leaves size changes to nobody, as upstream does.
	expandNever
)

// chooseResizer reports who expands the driver's volumes. A driver that neither expands nor modifies cannot
// be served: upstream exits too.
func chooseResizer(ctx context.Context, env *sidecar.Env) (expansion, error) {
	return resizerKind(env.DriverName, env.PluginCaps, env.ControllerCaps, func() (csiconn.NodeCapabilities, error) {
		return env.CSI.NodeCapabilities(ctx)
	})
}

// resizerKind is chooseResizer's decision; node is asked only when the other capabilities do not decide.
func resizerKind(driver string, plugin csiconn.PluginCapabilities, ctrl csiconn.ControllerCapabilities,
	node func() (csiconn.NodeCapabilities, error)) (expansion, error) {
	controllerService := plugin.Has(csi.PluginCapability_Service_CONTROLLER_SERVICE)
	if controllerService && ctrl.Has(csi.ControllerServiceCapability_RPC_EXPAND_VOLUME) {
		return expandInController, nil
	}
	if len(plugin.VolumeExpansion) > 0 {
		return expandOnNode, nil
	}
	if nodeCaps, err := node(); err == nil && nodeCaps.Has(csi.NodeServiceCapability_RPC_EXPAND_VOLUME) {
		return expandOnNode, nil
	}
	if controllerService && ctrl.Has(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME) {
		return expandNever, nil
	}
	return expandNever, fmt.Errorf("CSI driver %s supports neither volume expansion (controller or node) nor ControllerModifyVolume", driver)
}

// modifies decides whether claims' VolumeAttributesClasses are applied: the gate on, the driver with
// MODIFY_VOLUME, and the API server serving storage.k8s.io/v1 VolumeAttributesClasses. Without the API,
// ENABLE_VAC_FALLBACK=true runs as if the gate were off, as upstream; without it the resizer says why it
// does not modify and still expands.
func modifies(ctx context.Context, env *sidecar.Env) (bool, error) {
	logger := klog.FromContext(ctx)
	if !env.Flags.FeatureGates.Enabled(VolumeAttributesClass) {
		logger.Info("VolumeAttributesClass feature gate is off: claims are not modified")
		return false, nil
	}
	if !env.ControllerCaps.Has(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME) {
		logger.Info("Driver does not support ControllerModifyVolume: claims are not modified")
		return false, nil
	}
	fallback, err := vacFallback()
	if err != nil {
		return false, err
	}
	served, err := kubeclient.HasResource(env.Clients.Kube.Discovery(), "storage.k8s.io/v1", "volumeattributesclasses")
	if err != nil {
		return false, err
	}
	if served {
		return true, nil
	}
	if fallback {
		logger.Info("The API server does not serve storage.k8s.io/v1 VolumeAttributesClasses and " + vacFallbackEnv + " is true: running as if the VolumeAttributesClass feature gate were off")
	} else {
		logger.Info("Warning: the API server does not serve storage.k8s.io/v1 VolumeAttributesClasses: claims are not modified; set " +
			vacFallbackEnv + "=true or --feature-gates=VolumeAttributesClass=false to silence this")
	}
	return false, nil
}

func vacFallback() (bool, error) {
	v := os.Getenv(vacFallbackEnv)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("environment variable %s=%q is not a boolean", vacFallbackEnv, v)
	}
	return b, nil
}
