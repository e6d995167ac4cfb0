// Package capacity publishes CSIStorageCapacity objects (--enable-capacity): one per topology segment and
// StorageClass of the driver, holding GetCapacity's answer, labelled and owned as upstream's are so the
// scheduler and existing tooling read them the same way.
package capacity

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/provisioner/internal/provision"
)

// Upstream's labels on CSIStorageCapacity objects.
const (
	LabelDriverName = "csi.storage.k8s.io/drivername"
	LabelManagedBy  = "csi.storage.k8s.io/managed-by"
	managedByValue  = "external-provisioner"
)

// CapacityClient is the CSI call capacity tracking needs; csi.ControllerClient has it.
type CapacityClient interface {
	GetCapacity(ctx context.Context, in *csi.GetCapacityRequest, opts ...grpc.CallOption) (*csi.GetCapacityResponse, error)
}

// Config configures the controller.
type Config struct {
	Driver    string
	Namespace string
	// NodeName is set with --node-deployment: objects are then labelled managed-by external-provisioner-<node>
	// (shortened to a valid label value as upstream shortens it, ManagedBy), and only NodeSegment is published.
	NodeName string
	// NodeSegment is, under --node-deployment, the node's own segment as its driver reports it (NodeGetInfo);
	// nil when the driver reports none.
	NodeSegment map[string]string
	// Owner, when set, becomes every object's owner reference (--capacity-ownerref-level).
	Owner               *metav1.OwnerReference
	PollInterval        time.Duration
	Timeout             time.Duration
	ForImmediateBinding bool
	HasTopology         bool
}

// Controller keeps the driver's CSIStorageCapacity objects equal to GetCapacity's answers.
type Controller struct {
	cfg      Config
	kube     kubernetes.Interface // its own client with --kube-api-capacity-qps/-burst
	csi      CapacityClient
	classes  storagelisters.StorageClassLister
	csiNodes storagelisters.CSINodeLister
	nodes    corelisters.NodeLister
	kick     chan struct{}
	// refresh signals that targets holds (class, segment) pairs to refresh before the next poll (refresh.go).
	refresh chan struct{}
	mu      sync.Mutex
	targets targets

	goal, current, obsolete prometheus.Gauge
}

// New returns a Controller and registers its gauges with reg.
func New(cfg Config, kube kubernetes.Interface, c CapacityClient, classes storagelisters.StorageClassLister,
	csiNodes storagelisters.CSINodeLister, nodes corelisters.NodeLister, reg prometheus.Registerer) (*Controller, error) {
	ctrl := &Controller{
		cfg: cfg, kube: kube, csi: c, classes: classes, csiNodes: csiNodes, nodes: nodes,
		kick: make(chan struct{}, 1), refresh: make(chan struct{}, 1),
		goal:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "csistoragecapacities_desired_goal", Help: "Number of CSIStorageCapacity objects that are supposed to be managed automatically."}),
		current:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "csistoragecapacities_desired_current", Help: "Number of CSIStorageCapacity objects that exist and are supposed to be managed automatically."}),
		obsolete: prometheus.NewGauge(prometheus.GaugeOpts{Name: "csistoragecapacities_obsolete", Help: "Number of CSIStorageCapacity objects that exist and will be deleted automatically."}),
	}
	if reg != nil {
		for _, g := range []prometheus.Collector{ctrl.goal, ctrl.current, ctrl.obsolete} {
			if err := reg.Register(g); err != nil {
				return nil, fmt.Errorf("register capacity metrics: %w", err)
			}
		}
	}
	return ctrl, nil
}

// Kick asks for a reconcile soon, e.g. when a StorageClass or CSINode changed.
func (c *Controller) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run reconciles every poll interval and on Kick, and refreshes what Refresh named in between, until ctx ends;
// threads GetCapacity calls run in parallel.
func (c *Controller) Run(ctx context.Context, threads int) {
	logger := klog.FromContext(ctx).WithName("capacity")
	ctx = klog.NewContext(ctx, logger)
	t := time.NewTicker(c.cfg.PollInterval)
	defer t.Stop()
	full := true
	for {
		var err error
		if full {
			err = c.Reconcile(ctx, threads)
		} else {
			err = c.refreshTargets(ctx, threads)
		}
		if err != nil {
			logger.Error(err, "Updating CSIStorageCapacity objects failed; retrying at the next poll")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			full = true
		case <-c.kick:
			full = true
		case <-c.refresh:
			full = false
		}
	}
}

func (c *Controller) managedBy() string {
	if c.cfg.NodeName != "" {
		return ManagedBy(c.cfg.NodeName)
	}
	return managedByValue
}

// want is one desired object: a class in a segment (nil segment: the driver has no topology).
type want struct {
	class   *storagev1.StorageClass
	segment map[string]string
}

func (w want) key() string { return w.class.Name + "|" + segmentKey(w.segment) }

func segmentKey(s map[string]string) string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := ""
	for _, k := range keys {
		out += k + "=" + s[k] + ","
	}
	return out
}

// Reconcile makes one pass: GetCapacity for every (class, segment), create or update its object, delete the
// objects nothing wants any more. Unchanged objects cost no write.
func (c *Controller) Reconcile(ctx context.Context, threads int) error {
	wants, err := c.desired()
	if err != nil {
		return err
	}
	existing, obsolete, err := c.existing(ctx, wants)
	if err != nil {
		return err
	}
	c.goal.Set(float64(len(wants)))
	c.current.Set(float64(len(existing)))
	c.obsolete.Set(float64(len(obsolete)))

	errs := c.syncAll(ctx, threads, wants, existing)
	for _, o := range obsolete {
		if err := c.kube.StorageV1().CSIStorageCapacities(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("delete obsolete CSIStorageCapacity %s: %w", o.Name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d capacity updates failed, first: %w", len(errs), len(wants)+len(obsolete), errs[0])
	}
	return nil
}

// existing reads the objects this controller manages: the one kept for each wanted (class, segment), and the
// obsolete ones (wanted by nothing, or a second object for the same pair).
func (c *Controller) existing(ctx context.Context, wants []want) (map[string]*storagev1.CSIStorageCapacity, []*storagev1.CSIStorageCapacity, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelDriverName: c.cfg.Driver, LabelManagedBy: c.managedBy()})
	list, err := c.kube.StorageV1().CSIStorageCapacities(c.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, nil, fmt.Errorf("list CSIStorageCapacity objects: %w", err)
	}
	existing := map[string]*storagev1.CSIStorageCapacity{}
	var obsolete []*storagev1.CSIStorageCapacity
	wanted := map[string]bool{}
	for _, w := range wants {
		wanted[w.key()] = true
	}
	for i := range list.Items {
		o := &list.Items[i]
		var seg map[string]string
		if o.NodeTopology != nil {
			seg = o.NodeTopology.MatchLabels
		}
		k := o.StorageClassName + "|" + segmentKey(seg)
		if !wanted[k] || existing[k] != nil {
			obsolete = append(obsolete, o)
			continue
		}
		existing[k] = o
	}
	return existing, obsolete, nil
}

// syncAll syncs wants, threads at a time, and returns the errors.
func (c *Controller) syncAll(ctx context.Context, threads int, wants []want, existing map[string]*storagev1.CSIStorageCapacity) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, max(threads, 1))
	)
	for _, w := range wants {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := c.sync(ctx, w, existing[w.key()]); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// desired lists the (class, segment) pairs to publish.
func (c *Controller) desired() ([]want, error) {
	classes, err := c.classes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	segments := []map[string]string{nil}
	switch {
	case c.cfg.NodeName != "":
		// A node's provisioner speaks for its own node's driver only, as upstream's does.
		segments = []map[string]string{c.cfg.NodeSegment}
	case c.cfg.HasTopology:
		if segments, err = provision.TopologySegments(c.cfg.Driver, c.csiNodes, c.nodes); err != nil {
			return nil, err
		}
	}
	var out []want
	for _, class := range classes {
		if class.Provisioner != c.cfg.Driver {
			continue
		}
		late := class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
		if !late && !c.cfg.ForImmediateBinding {
			continue
		}
		for _, s := range segments {
			out = append(out, want{class: class, segment: s})
		}
	}
	return out, nil
}

// sync asks the driver for one (class, segment) and writes the object if the answer changed.
func (c *Controller) sync(ctx context.Context, w want, have *storagev1.CSIStorageCapacity) error {
	params, fsType, err := provision.DriverParameters(w.class.Parameters)
	if err != nil {
		return fmt.Errorf("StorageClass %s: %w", w.class.Name, err)
	}
	req := &csi.GetCapacityRequest{
		Parameters: params,
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_UNKNOWN},
		}},
	}
	if w.segment != nil {
		req.AccessibleTopology = &csi.Topology{Segments: w.segment}
	}
	callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	resp, err := c.csi.GetCapacity(callCtx, req)
	cancel()
	if err != nil {
		return fmt.Errorf("GetCapacity for StorageClass %s in %v: %w", w.class.Name, w.segment, err)
	}
	capQ := resource.NewQuantity(resp.AvailableCapacity, resource.BinarySI)
	var maxQ *resource.Quantity
	if resp.MaximumVolumeSize != nil {
		maxQ = resource.NewQuantity(resp.MaximumVolumeSize.Value, resource.BinarySI)
	}
	if have != nil {
		if quantityEqual(have.Capacity, capQ) && quantityEqual(have.MaximumVolumeSize, maxQ) {
			return nil
		}
		upd := have.DeepCopy()
		upd.Capacity, upd.MaximumVolumeSize = capQ, maxQ
		_, err := c.kube.StorageV1().CSIStorageCapacities(upd.Namespace).Update(ctx, upd, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("update CSIStorageCapacity %s: %w", upd.Name, err)
		}
		return nil
	}
	obj := &storagev1.CSIStorageCapacity{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "csisc-",
			Namespace:    c.cfg.Namespace,
			Labels:       map[string]string{LabelDriverName: c.cfg.Driver, LabelManagedBy: c.managedBy()},
		},
		StorageClassName:  w.class.Name,
		Capacity:          capQ,
		MaximumVolumeSize: maxQ,
	}
	if w.segment != nil {
		obj.NodeTopology = &metav1.LabelSelector{MatchLabels: maps.Clone(w.segment)}
	}
	if c.cfg.Owner != nil {
		obj.OwnerReferences = []metav1.OwnerReference{*c.cfg.Owner}
	}
	if _, err := c.kube.StorageV1().CSIStorageCapacities(c.cfg.Namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create CSIStorageCapacity for StorageClass %s: %w", w.class.Name, err)
	}
	return nil
}

func quantityEqual(a, b *resource.Quantity) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Cmp(*b) == 0
}

// Owner finds the object that owns the capacity objects: the pod (level 0), its controller (1), that one's
// controller (2), following upstream's --capacity-ownerref-level. Level <0 means no owner.
func Owner(ctx context.Context, kube kubernetes.Interface, namespace, podName string, level int) (*metav1.OwnerReference, error) {
	if level < 0 {
		return nil, nil
	}
	pod, err := kube.CoreV1().Pods(namespace).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get pod %s/%s for the capacity owner: %w", namespace, podName, err)
	}
	ref := &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}
	meta := pod.ObjectMeta
	for i := 0; i < level; i++ {
		ctrl := metav1.GetControllerOf(&meta)
		if ctrl == nil {
			return nil, fmt.Errorf("%s %s has no controller; lower --capacity-ownerref-level", ref.Kind, ref.Name)
		}
		ref = &metav1.OwnerReference{APIVersion: ctrl.APIVersion, Kind: ctrl.Kind, Name: ctrl.Name, UID: ctrl.UID}
		if i+1 == level {
			break
		}
		next, err := ownerMeta(ctx, kube, namespace, ctrl)
		if err != nil {
			return nil, err
		}
		meta = next
	}
	t := true
	ref.Controller = &t
	return ref, nil
}

// ownerMeta reads the metadata of the workload kinds a sidecar pod is usually owned by.
func ownerMeta(ctx context.Context, kube kubernetes.Interface, ns string, ref *metav1.OwnerReference) (metav1.ObjectMeta, error) {
	apps := kube.AppsV1()
	get := metav1.GetOptions{}
	var (
		obj metav1.Object
		err error
	)
	switch ref.Kind {
	case "ReplicaSet":
		obj, err = apps.ReplicaSets(ns).Get(ctx, ref.Name, get)
	case "StatefulSet":
		obj, err = apps.StatefulSets(ns).Get(ctx, ref.Name, get)
	case "DaemonSet":
		obj, err = apps.DaemonSets(ns).Get(ctx, ref.Name, get)
	case "Deployment":
		obj, err = apps.Deployments(ns).Get(ctx, ref.Name, get)
	default:
		return metav1.ObjectMeta{}, fmt.Errorf("cannot follow owner %s %s for --capacity-ownerref-level", ref.Kind, ref.Name)
	}
	if err != nil {
		return metav1.ObjectMeta{}, fmt.Errorf("get %s %s/%s for the capacity owner: %w", ref.Kind, ns, ref.Name, err)
	}
	return metav1.ObjectMeta{Name: obj.GetName(), UID: obj.GetUID(), OwnerReferences: obj.GetOwnerReferences()}, nil
}
