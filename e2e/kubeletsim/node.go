package kubeletsim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Well-known labels and annotations the kubelet sets on its Node.
const (
	LabelZone              = "topology.kubernetes.io/zone"
	LabelInstanceType      = "node.kubernetes.io/instance-type"
	LabelHostname          = "kubernetes.io/hostname"
	annotationControllerAD = "volumes.kubernetes.io/controller-managed-attach-detach"
	annotationNodeID       = "csi.volume.kubernetes.io/nodeid"
)

// csiTimeout bounds each call to the node plugin, like the kubelet's 2-minute CSI timeout.
const csiTimeout = 2 * time.Minute

// Config describes one simulated node.
type Config struct {
	// Client reaches the API server; it needs to read Pods, claims, volumes, VolumeAttachments, CSIDrivers
	// and Secrets, write Nodes, CSINodes, Leases and Pod and claim status, create tokens and delete Pods.
	Client kubernetes.Interface
	// NodeName is the Node's name.
	NodeName string
	// Zone and InstanceType become the Node's topology.kubernetes.io/zone and
	// node.kubernetes.io/instance-type labels when set.
	Zone, InstanceType string
	// Labels are extra Node labels.
	Labels map[string]string
	// Taints are put on the Node when this creates it, as the kubelet's --register-with-taints does (e.g. a
	// driver's startup taint that its node plugin removes once registered).
	Taints []v1.Taint
	// PluginSocket is the node plugin's CSI socket (a path, or unix:///path).
	PluginSocket string
	// RootDir is the kubelet's root directory (default /var/lib/kubelet); it is created if missing.
	RootDir string
	// Logger logs what the node does; empty means klog's from the context given to Start.
	Logger klog.Logger

	// Images are the container images the node can run, by image name. A Pod whose containers all use one
	// of them is run (emptyDirs, sandboxed processes, restarts, container status); other Pods are Running
	// as soon as their volumes are published, and nothing runs.
	Images map[string]Image
	// MaxGracePeriod caps the termination grace period of a deleted Pod's containers (default 30s).
	MaxGracePeriod time.Duration
	// RestartBackoff and MaxRestartBackoff bound the delay before a crashed container is restarted, which
	// doubles from the first to the second (defaults 1s and 10s; the kubelet's are 10s and 5m).
	RestartBackoff, MaxRestartBackoff time.Duration
}

// Node is a running simulated node.
type Node struct {
	cfg    Config
	log    klog.Logger
	client kubernetes.Interface
	paths  paths
	conn   *grpc.ClientConn
	node   csi.NodeClient

	driver   string
	nodeID   string
	caps     nodeCaps
	queue    workqueue.TypedRateLimitingInterface[string]
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once
	stopErr  error

	pods       corelisters.PodLister
	claims     corelisters.PersistentVolumeClaimLister
	volumes    corelisters.PersistentVolumeLister
	nodes      corelisters.NodeLister
	attachment storagelisters.VolumeAttachmentLister
	drivers    storagelisters.CSIDriverLister

	state *state
	// recorder writes the Pod Events the kubelet writes (FailedMount); stopEvents flushes and ends it.
	recorder   record.EventRecorder
	stopEvents func()
	reportMu   sync.Mutex
	reported   []string
	// runs are the Pods whose containers run here.
	runs runs
}

// nodeCaps are the node plugin's capabilities the kubelet acts on.
type nodeCaps struct {
	stage, expand, mountGroup, multiWriter bool
}

// Start connects to the node plugin, registers the Node and its CSINode, and starts handling the Pods bound
// to it. It returns once the Node is registered and the caches are in sync.
func Start(ctx context.Context, cfg Config) (_ *Node, err error) {
	if cfg.Client == nil || cfg.NodeName == "" || cfg.PluginSocket == "" {
		return nil, errors.New("kubeletsim: Client, NodeName and PluginSocket are required")
	}
	if cfg.RootDir == "" {
		cfg.RootDir = "/var/lib/kubelet"
	}
	if err := os.MkdirAll(cfg.RootDir, 0o750); err != nil {
		return nil, fmt.Errorf("kubeletsim: root dir: %w", err)
	}
	cfg.MaxGracePeriod = cmp.Or(cfg.MaxGracePeriod, defaultMaxGracePeriod)
	cfg.RestartBackoff = cmp.Or(cfg.RestartBackoff, defaultRestartBackoff)
	cfg.MaxRestartBackoff = max(cmp.Or(cfg.MaxRestartBackoff, defaultMaxRestartBackoff), cfg.RestartBackoff)
	log := cfg.Logger
	if log.GetSink() == nil {
		log = klog.FromContext(ctx)
	}
	n := &Node{cfg: cfg, log: log.WithName("kubeletsim").WithValues("node", cfg.NodeName), client: cfg.Client,
		paths: paths{root: cfg.RootDir}, state: newState(), runs: runs{pods: map[string]*podRun{}}}
	target := cfg.PluginSocket
	if len(target) > 0 && target[0] == '/' {
		target = "unix://" + target
	}
	if n.conn, err = grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return nil, fmt.Errorf("kubeletsim: connect %s: %w", target, err)
	}
	defer func() {
		if err != nil {
			_ = n.conn.Close()
		}
	}()
	n.node = csi.NewNodeClient(n.conn)
	if err := n.probePlugin(ctx); err != nil {
		return nil, err
	}
	if err := n.register(ctx); err != nil {
		return nil, err
	}

	runCtx, cancel := context.WithCancel(klog.NewContext(context.Background(), n.log))
	n.cancel = cancel
	n.recorder, n.stopEvents = newRecorder(runCtx, n)
	n.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 2*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "kubeletsim-" + cfg.NodeName})
	if err := n.startInformers(ctx, runCtx); err != nil {
		n.queue.ShutDown()
		n.stopEvents()
		cancel()
		n.wg.Wait()
		return nil, err
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.renewLease(runCtx)
	}()
	for range 4 {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			for n.processNext(runCtx) {
			}
		}()
	}
	n.log.Info("Node started", "driver", n.driver, "nodeID", n.nodeID, "root", cfg.RootDir)
	return n, nil
}

// probePlugin reads the driver name and node capabilities, waiting for the plugin to answer.
func (n *Node) probePlugin(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var info *csi.GetPluginInfoResponse
	var err error
	for {
		callCtx, callCancel := context.WithTimeout(ctx, 5*time.Second)
		info, err = csi.NewIdentityClient(n.conn).GetPluginInfo(callCtx, &csi.GetPluginInfoRequest{})
		callCancel()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubeletsim: node plugin at %s does not answer GetPluginInfo: %w", n.cfg.PluginSocket, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	n.driver = info.GetName()
	caps, err := n.node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		return fmt.Errorf("kubeletsim: NodeGetCapabilities: %w", err)
	}
	for _, c := range caps.GetCapabilities() {
		switch c.GetRpc().GetType() {
		case csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME:
			n.caps.stage = true
		case csi.NodeServiceCapability_RPC_EXPAND_VOLUME:
			n.caps.expand = true
		case csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP:
			n.caps.mountGroup = true
		case csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER:
			n.caps.multiWriter = true
		}
	}
	return nil
}

// startInformers starts the caches and the event handlers that queue the node's Pods.
func (n *Node) startInformers(ctx, runCtx context.Context) error {
	podFactory := informers.NewSharedInformerFactoryWithOptions(n.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", n.cfg.NodeName).String()
	}))
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(n.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", n.cfg.NodeName).String()
	}))
	factory := informers.NewSharedInformerFactory(n.client, 0)

	podInf := podFactory.Core().V1().Pods()
	n.pods = podInf.Lister()
	n.nodes = nodeFactory.Core().V1().Nodes().Lister()
	n.claims = factory.Core().V1().PersistentVolumeClaims().Lister()
	n.volumes = factory.Core().V1().PersistentVolumes().Lister()
	n.attachment = factory.Storage().V1().VolumeAttachments().Lister()
	n.drivers = factory.Storage().V1().CSIDrivers().Lister()

	podHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.enqueue(obj) },
		UpdateFunc: func(_, obj any) { n.enqueue(obj) },
		DeleteFunc: func(obj any) { n.enqueue(obj) },
	}
	// Anything else that changes may unblock a waiting Pod or call for an expansion: look at all of them.
	all := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { n.enqueueAll() },
		UpdateFunc: func(any, any) { n.enqueueAll() },
		DeleteFunc: func(any) { n.enqueueAll() },
	}
	if _, err := podInf.Informer().AddEventHandler(podHandler); err != nil {
		return err
	}
	for _, inf := range []cache.SharedIndexInformer{
		nodeFactory.Core().V1().Nodes().Informer(),
		factory.Core().V1().PersistentVolumeClaims().Informer(),
		factory.Core().V1().PersistentVolumes().Informer(),
		factory.Storage().V1().VolumeAttachments().Informer(),
		factory.Storage().V1().CSIDrivers().Informer(),
	} {
		if _, err := inf.AddEventHandler(all); err != nil {
			return err
		}
	}
	for _, f := range []informers.SharedInformerFactory{podFactory, nodeFactory, factory} {
		f.Start(runCtx.Done())
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		<-runCtx.Done()
		for _, f := range []informers.SharedInformerFactory{podFactory, nodeFactory, factory} {
			f.Shutdown()
		}
	}()
	for _, f := range []informers.SharedInformerFactory{podFactory, nodeFactory, factory} {
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("kubeletsim: cache of %v did not sync", typ)
			}
		}
	}
	return nil
}

func (n *Node) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err == nil {
		n.queue.Add(key)
	}
}

// enqueueAll queues every Pod of the node, and every Pod the node still holds volumes for.
func (n *Node) enqueueAll() {
	pods, err := n.pods.List(labelsEverything())
	if err == nil {
		for _, p := range pods {
			n.queue.Add(p.Namespace + "/" + p.Name)
		}
	}
	for _, key := range n.state.podKeys() {
		n.queue.Add(key)
	}
}

func (n *Node) processNext(ctx context.Context) bool {
	key, quit := n.queue.Get()
	if quit {
		return false
	}
	defer n.queue.Done(key)
	err := n.syncPod(ctx, key)
	switch {
	case err == nil:
		n.queue.Forget(key)
	case errors.Is(err, errWaiting):
		n.log.V(4).Info("Pod waiting", "pod", key, "reason", err.Error())
		n.queue.AddRateLimited(key)
	default:
		n.log.Error(err, "Pod sync failed", "pod", key)
		if ns, name, ok := strings.Cut(key, "/"); ok {
			if pod, getErr := n.pods.Pods(ns).Get(name); getErr == nil && pod.DeletionTimestamp == nil {
				n.reportFailedMount(pod, err)
			}
		}
		n.queue.AddRateLimited(key)
	}
	return true
}

// Name is the Node's name.
func (n *Node) Name() string { return n.cfg.NodeName }

// NodeID is the plugin's node ID from NodeGetInfo.
func (n *Node) NodeID() string { return n.nodeID }

// RootDir is the kubelet root directory of the node.
func (n *Node) RootDir() string { return n.cfg.RootDir }

// PublishPath is where a file-system volume (PersistentVolume name, or inline volume name) is published for
// a Pod on this node.
func (n *Node) PublishPath(podUID string, specName string) string {
	return n.paths.publishPath(typesUID(podUID), specName)
}

// EmptyDirPath is the host directory of an emptyDir volume of a Pod whose containers run on this node
// (for a Mountpoint Pod, EmptyDirPath(uid, "comm") holds mount.sock).
func (n *Node) EmptyDirPath(podUID string, volumeName string) string {
	return n.paths.emptyDirPath(typesUID(podUID), volumeName)
}

// DevicePath is the path a Pod on this node sees a raw block volume at.
func (n *Node) DevicePath(podUID string, pvName string) string {
	return n.paths.podDevicePath(typesUID(podUID), pvName)
}

// StagingPath is where a file-system volume is staged on this node.
func (n *Node) StagingPath(volumeHandle string) string {
	return n.paths.stagingPath(n.driver, volumeHandle)
}

// Stop stops handling Pods, kills every container it runs, unpublishes and unstages every volume the node still has (as a drained node
// would), unmounts anything left under RootDir, and closes the plugin connection. The Node object stays.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() {
		n.cancel()
		n.queue.ShutDown()
		n.wg.Wait()
		n.stopEvents()
		n.killAllContainers()
		ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), n.log), 2*time.Minute)
		defer cancel()
		var errs []error
		for _, key := range n.state.podKeys() {
			if err := n.tearDownPod(ctx, key); err != nil {
				errs = append(errs, err)
			}
		}
		if err := unmountAll(n.cfg.RootDir); err != nil {
			errs = append(errs, err)
		}
		if err := n.conn.Close(); err != nil {
			errs = append(errs, err)
		}
		n.stopErr = errors.Join(errs...)
		n.log.Info("Node stopped")
	})
	return n.stopErr
}
