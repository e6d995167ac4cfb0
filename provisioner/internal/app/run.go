package app

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/provisioner/internal/capacity"
	"github.com/stowage-csi/stowage/provisioner/internal/controller"
	"github.com/stowage-csi/stowage/provisioner/internal/metrics"
	"github.com/stowage-csi/stowage/provisioner/internal/provision"
	"github.com/stowage-csi/stowage/shared/kubeclient"
	"github.com/stowage-csi/stowage/shared/sidecar"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

// Run runs the provisioner's controllers while this replica leads, until ctx ends.
func Run(ctx context.Context, env *sidecar.Env, cfg *Config) error {
	d, err := cfg.leaderDeps(env)
	if err != nil {
		return err
	}
	// Custom resources speak JSON only.
	if d.snaps, err = snapclient.NewForConfig(kubeclient.ForCRDs(env.Clients.Config)); err != nil {
		return fmt.Errorf("snapshot client: %w", err)
	}
	return lead(ctx, cfg, d)
}

// lead runs the controllers while this replica leads.
func lead(ctx context.Context, cfg *Config, d leaderDeps) error {
	logger := klog.FromContext(ctx)
	factory := kubeclient.NewInformerFactory(d.kube, 0)
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
	var vacLister storagelisters.VolumeAttributesClassLister
	if hasResource(d.kube, "storage.k8s.io/v1", "volumeattributesclasses") {
		vacLister = factory.Storage().V1().VolumeAttributesClasses().Lister()
	}

	p := provision.New(provision.Config{
		DriverName:                     d.driver,
		Identity:                       fmt.Sprintf("%d-%d-%s", time.Now().UnixMilli(), rand.IntN(10000), d.driver),
		VolumeNamePrefix:               cfg.VolumeNamePrefix,
		VolumeNameUUIDLength:           cfg.VolumeNameUUIDLength,
		Timeout:                        d.env.Flags.Timeout,
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
		Kube: d.kube, Snapshots: d.snaps, CSI: csi.NewControllerClient(d.env.CSI.GRPC()),
		Claims: claimInf.Lister(), Volumes: volumeInf.Lister(), Classes: classInf.Lister(),
		CSINodes: csiNodeLister, Nodes: nodeLister, Attachments: vaInf.Lister(),
		AttrClasses: vacLister, Recorder: d.env.Events, Metrics: metrics.New(d.env.Metrics.Registerer()),
	})

	var queues controller.Queues
	for name, q := range map[string]*workqueue.Queue[string]{"claims": &queues.Claims, "volumes": &queues.Volumes, "clone-sources": &queues.CloneSources} {
		var err error
		if *q, err = workqueue.New[string](d.env.Queues, d.env.QueueConfig(name)); err != nil {
			return err
		}
	}
	ctrl, err := controller.New(controller.Config{
		Workers: d.env.Flags.WorkerThreads, CloneWorkers: cfg.CloningProtectionThreads, SlowRetry: d.env.Flags.RetryIntervalMax,
	}, p, controller.Informers{
		Claims: claimInf.Informer(), Volumes: volumeInf.Informer(), Classes: classInf.Informer(), Attachments: vaInf.Informer(),
	}, queues)
	if err != nil {
		return err
	}
	var capCtrl *capacity.Controller
	if cfg.EnableCapacity {
		if capCtrl, err = newCapacity(ctx, cfg, d, factory); err != nil {
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
