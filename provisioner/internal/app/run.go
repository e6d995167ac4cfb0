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
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	storageinformers "k8s.io/client-go/informers/storage/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/provisioner/internal/capacity"
	"github.com/stowage-csi/stowage/provisioner/internal/controller"
	"github.com/stowage-csi/stowage/provisioner/internal/metrics"
	"github.com/stowage-csi/stowage/provisioner/internal/provision"
	"github.com/stowage-csi/stowage/shared/kubeclient"
	"github.com/stowage-csi/stowage/shared/leaderelection"
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
	factory := kubeclient.NewInformerFactory(d.kube, 0)
	vac, err := d.readAttributesClasses(ctx)
	if err != nil {
		return err
	}
	c, err := newCaches(factory, d)
	if err != nil {
		return err
	}
	// The journal a predecessor (this replica before a kill, or another leader) left: its claims are
	// finished or undone like any other once the caches have synced.
	journal := newJournal(d)
	recovered, err := journal.Load(ctx)
	if err != nil {
		return err
	}
	var capCtrl *capacity.Controller
	if cfg.EnableCapacity {
		if capCtrl, err = newCapacity(ctx, cfg, d, factory); err != nil {
			return err
		}
	}
	ctrl, err := newController(cfg, d, c, vac, journal, capCtrl)
	if err != nil {
		return err
	}

	factory.Start(ctx.Done())
	kubeclient.LeanSync(ctx, factory)
	defer factory.Shutdown()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer cache for %v did not sync", typ)
		}
	}
	klog.FromContext(ctx).Info("Caches synced, provisioning", "journal", journal.Name(), "recoveredClaims", len(recovered))
	var wg sync.WaitGroup
	// The record is written until the workers are done: Run drains them after ctx ends, and what they cleared
	// is flushed last.
	journalCtx, stopJournal := context.WithCancel(context.WithoutCancel(ctx))
	defer stopJournal()
	wg.Go(func() { journal.Run(journalCtx) })
	ctrl.EnqueueClaims(recovered)
	if capCtrl != nil {
		wg.Go(func() { capCtrl.Run(ctx, cfg.CapacityThreads) })
	}
	// While this replica leads, a restart of the driver is followed instead of ending the process, and the
	// claims and volumes it interrupted are retried as soon as it is back.
	stopFollowing := d.env.CSI.StartFollowingRestarts(ctx, ctrl.DriverBack)
	ctrl.Run(ctx)
	stopFollowing()
	flushCtx, cancelFlush := context.WithTimeout(journalCtx, 5*time.Second)
	journal.Flush(flushCtx)
	cancelFlush()
	stopJournal()
	wg.Wait()
	return nil
}

// newJournal is the journal of this provisioner identity: a Lease next to the leader election one (the
// namespace upstream's RBAC grants leases in), one per node under --node-deployment.
func newJournal(d leaderDeps) *provision.Journal {
	ns := leaderelection.ResolveNamespace(d.env.Flags.LeaderElectionNamespace, leaderelection.ServiceAccountNamespaceFile)
	return provision.NewJournal(d.kube.CoordinationV1().Leases(ns), provision.JournalConfig{
		Name:   provision.JournalName(leaderelection.LockName(LockPrefix, d.driver), d.nodeName),
		Window: journalWindow, ClearAfter: journalClearAfter,
	})
}

// journalWindow gathers the claims of a burst into one record write; it adds at most this much to a claim's
// CreateVolume latency. journalClearAfter is how long cleared entries wait for a write to ride on: an entry left
// a while costs nothing (a restart finds its PV), a write of its own costs a write.
const (
	journalWindow     = 20 * time.Millisecond
	journalClearAfter = 30 * time.Second
)

// caches are the informers and listers the provisioner reads; a nil lister is one it has no use for.
type caches struct {
	claims      coreinformers.PersistentVolumeClaimInformer
	volumes     coreinformers.PersistentVolumeInformer
	classes     storageinformers.StorageClassInformer
	attachments storageinformers.VolumeAttachmentInformer
	// csiNodes and nodes are cached only for topology.
	csiNodes storagelisters.CSINodeLister
	nodes    corelisters.NodeLister
}

// vacUse is what the provisioner does with the VolumeAttributesClasses claims name.
type vacUse struct {
	read bool // GET the classes claims name
	gate bool // the VolumeAttributesClass gate in effect; off, claims' class names are ignored as upstream
}

// readAttributesClasses applies the VolumeAttributesClass gate: on, and the API server serving the
// storage.k8s.io/v1 API, the leader reads the classes claims name; on without the API, it runs as if the gate
// were off, as upstream's provisioner does on its own (no environment variable needed; the ENABLE_VAC_FALLBACK
// that aws-ebs-csi-driver's manifest sets changes nothing here). With the gate off the API server is not even
// asked whether it serves the API.
func (d leaderDeps) readAttributesClasses(ctx context.Context) (vacUse, error) {
	logger := klog.FromContext(ctx)
	if !d.env.Flags.FeatureGates.Enabled(VolumeAttributesClass) {
		logger.Info("VolumeAttributesClass feature gate is off: VolumeAttributesClasses are not read and claims' spec.volumeAttributesClassName is ignored")
		return vacUse{}, nil
	}
	served, err := kubeclient.HasResource(d.kube.Discovery(), "storage.k8s.io/v1", "volumeattributesclasses")
	if err != nil {
		return vacUse{}, err
	}
	if !served {
		logger.Info("Disabling the VolumeAttributesClass feature gate: the API server does not serve storage.k8s.io/v1 VolumeAttributesClasses")
		return vacUse{}, nil
	}
	return vacUse{read: true, gate: true}, nil
}

// newCaches registers the informers the provisioner needs on factory. VolumeAttributesClasses are not among them:
// the provisioner GETs the ones claims name, as upstream, whose RBAC grants no list or watch on them.
func newCaches(factory informers.SharedInformerFactory, d leaderDeps) (caches, error) {
	c := caches{
		claims:      factory.Core().V1().PersistentVolumeClaims(),
		volumes:     factory.Core().V1().PersistentVolumes(),
		classes:     factory.Storage().V1().StorageClasses(),
		attachments: factory.Storage().V1().VolumeAttachments(),
	}
	if err := c.claims.Informer().SetTransform(trimClaim); err != nil {
		return caches{}, fmt.Errorf("claim informer transform: %w", err)
	}
	if err := c.volumes.Informer().SetTransform(trimVolume); err != nil {
		return caches{}, fmt.Errorf("PV informer transform: %w", err)
	}
	if d.caps.Topology {
		// Only Node labels are read (here and in capacity): dropping status and managed fields keeps that cache
		// small on big clusters.
		nodeInf := factory.Core().V1().Nodes()
		if err := nodeInf.Informer().SetTransform(func(o any) (any, error) {
			if n, ok := o.(*v1.Node); ok {
				n.Status = v1.NodeStatus{}
				n.ManagedFields = nil
			}
			return o, nil
		}); err != nil {
			return caches{}, fmt.Errorf("node informer transform: %w", err)
		}
		c.csiNodes, c.nodes = factory.Storage().V1().CSINodes().Lister(), nodeInf.Lister()
	}
	return c, nil
}

// newController builds the Provisioner and the controller that feeds it from c, with its three queues, telling capCtrl (if any) of volume changes; vac says
// whether it reads the VolumeAttributesClasses claims name or ignores them.
func newController(cfg *Config, d leaderDeps, c caches, vac vacUse, journal *provision.Journal, capCtrl *capacity.Controller) (*controller.Controller, error) {
	var refresher provision.CapacityRefresher
	if capCtrl != nil {
		refresher = capCtrl
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
		AttrClassesServed:              vac.read,
		AttrClassesIgnored:             !vac.gate,
	}, provision.Deps{
		Kube: d.kube, Snapshots: d.snaps, CSI: csi.NewControllerClient(d.env.CSI.GRPC()),
		Claims: c.claims.Lister(), Volumes: c.volumes.Lister(), Classes: c.classes.Lister(),
		CSINodes: c.csiNodes, Nodes: c.nodes, Attachments: c.attachments.Lister(),
		Recorder: d.env.Events, Metrics: metrics.New(d.env.Metrics.Registerer()), Journal: journal,
		Capacity: refresher,
	})
	var queues controller.Queues
	for name, q := range map[string]*workqueue.Queue[string]{"claims": &queues.Claims, "volumes": &queues.Volumes, "clone-sources": &queues.CloneSources} {
		var err error
		if *q, err = workqueue.New[string](d.env.Queues, d.env.QueueConfig(name)); err != nil {
			return nil, err
		}
	}
	return controller.New(controller.Config{
		Workers: d.env.Flags.WorkerThreads, CloneWorkers: cfg.CloningProtectionThreads, SlowRetry: d.env.Flags.RetryIntervalMax,
	}, p, controller.Informers{
		Claims: c.claims.Informer(), Volumes: c.volumes.Informer(), Classes: c.classes.Informer(), Attachments: c.attachments.Informer(),
	}, queues)
}
