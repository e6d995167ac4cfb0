// Package labeler is upstream's metadataLabeler mode: it keeps on every Node the number of network interfaces
// and of EBS volumes no PersistentVolume names, which share the instance's attachment slots with CSI volumes,
// so that a node plugin reading its instance from the Node object (--metadata-sources=kubernetes, no IMDS)
// still reports the right attach limit.
package labeler

import (
	"context"
	"encoding/json"
	"fmt"
	"path"

	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/cloud"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/metadata"
)

// Interval is how often every Node is labelled again, as upstream (new Nodes are labelled when they appear).
const Interval = 60 * time.Minute

// maxFailedPatches is how many Nodes may fail to be patched in one round before the round is an error.
const maxFailedPatches = 5

const volumeIDIndex = "volumeID"

// Instances describes EC2 instances; *cloud.Cloud implements it.
type Instances interface {
	InstanceDevices(ctx context.Context, ids []string) (map[string]cloud.InstanceDevices, error)
}

// Labeler labels Nodes with metadata.VolumesLabel and metadata.ENIsLabel.
type Labeler struct {
	Client    kubernetes.Interface
	Instances Instances
	// Driver is the CSI driver whose PVs' volumes are not counted (ebs.csi.aws.com).
	Driver   string
	Interval time.Duration
}

// Run labels every Node once the informers have synced, then every Interval, and each new Node as it
// appears, until ctx ends. A failed round is logged and tried again at the next one.
func (l *Labeler) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("metadata-labeler")
	factory := informers.NewSharedInformerFactory(l.Client, 0)
	pvs := factory.Core().V1().PersistentVolumes().Informer()
	if err := pvs.AddIndexers(cache.Indexers{volumeIDIndex: l.pvVolumeIDs}); err != nil {
		return fmt.Errorf("index PersistentVolumes by volume ID: %w", err)
	}
	nodeInformer := factory.Core().V1().Nodes()
	added := make(chan string, 100)
	_, err := nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			// The Nodes of the initial list are labelled by the first round, in one DescribeInstances.
			if n, ok := obj.(*corev1.Node); ok && !initial {
				select {
				case added <- n.Name:
				case <-ctx.Done():
				}
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch Nodes: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("%v informer did not sync: %w", typ, ctx.Err())
		}
	}
	l.round(ctx, logger, nodeInformer.Lister().List, pvs.GetIndexer())
	ticker := time.NewTicker(l.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			l.round(ctx, logger, nodeInformer.Lister().List, pvs.GetIndexer())
		case name := <-added:
			// Nodes that join together are described together.
			names := []string{name}
			for more := true; more; {
				select {
				case n := <-added:
					names = append(names, n)
				default:
					more = false
				}
			}
			var nodes []*corev1.Node
			for _, n := range names {
				if node, err := nodeInformer.Lister().Get(n); err == nil {
					nodes = append(nodes, node)
				}
			}
			if err := l.Label(ctx, nodes, pvs.GetIndexer()); err != nil {
				logger.Error(err, "Labelling new Nodes failed", "nodes", names)
			}
		}
	}
}

func (l *Labeler) round(ctx context.Context, logger klog.Logger, list func(labels.Selector) ([]*corev1.Node, error), pvs cache.Indexer) {
	nodes, err := list(labels.Everything())
	if err == nil {
		err = l.Label(ctx, nodes, pvs)
	}
	if err != nil {
		logger.Error(err, "Labelling Nodes failed; trying again at the next round", "interval", l.Interval)
	}
}

// Label describes the instances behind nodes (Nodes without an AWS providerID, or whose instance EC2 does not
// know, are left alone) and patches each Node whose labels differ. pvs indexes PersistentVolumes by volume ID.
func (l *Labeler) Label(ctx context.Context, nodes []*corev1.Node, pvs cache.Indexer) error {
	logger := klog.FromContext(ctx)
	ids := make([]string, 0, len(nodes))
	instanceOf := map[string]string{}
	for _, n := range nodes {
		id, _, err := metadata.ProviderInstanceID(n)
		if err != nil {
			logger.V(4).Info("Not labelling a Node without an EC2 instance", "node", n.Name, "err", err.Error())
			continue
		}
		instanceOf[n.Name] = id
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil
	}
	devices, err := l.Instances.InstanceDevices(ctx, ids)
	if err != nil {
		return err
	}
	failed := 0
	var firstErr error
	for _, n := range nodes {
		d, ok := devices[instanceOf[n.Name]]
		if !ok {
			continue
		}
		want := Labels(d, func(volumeID string) bool {
			owners, err := pvs.ByIndex(volumeIDIndex, volumeID)
			return err == nil && len(owners) > 0
		})
		if err := l.patch(ctx, n, want); err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
			if failed == maxFailedPatches {
				break
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d Nodes not labelled: %w", failed, firstErr)
	}
	return nil
}

// Labels are the labels for an instance: its interfaces (at least 1, as upstream assumes when EC2 lists
// none) and the EBS volumes no PV names (managed tells), less the root volume, which the node plugin reserves
// by itself; never below 0 (upstream writes -1 for an instance without mappings).
func Labels(d cloud.InstanceDevices, managed func(volumeID string) bool) map[string]string {
	volumes := 0
	for _, id := range d.VolumeIDs {
		if !managed(id) {
			volumes++
		}
	}
	return map[string]string{
		metadata.VolumesLabel: strconv.Itoa(max(volumes-1, 0)),
		metadata.ENIsLabel:    strconv.Itoa(max(d.ENIs, 1)),
	}
}

// patch sets the labels with a merge patch of just these keys, so it races with no other writer of the Node;
// a Node that already has them is not written.
func (l *Labeler) patch(ctx context.Context, n *corev1.Node, want map[string]string) error {
	same := true
	for k, v := range want {
		if n.Labels[k] != v {
			same = false
		}
	}
	if same {
		return nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": want}})
	if err != nil {
		return err
	}
	if _, err := l.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch Node %s: %w", n.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Labelled Node", "node", n.Name, "labels", want)
	return nil
}

// pvVolumeIDs indexes a PV by the EBS volume it names: a CSI volume of the driver, or an in-tree
// awsElasticBlockStore volume (whose ID may be written "aws://<zone>/<vol-id>").
func (l *Labeler) pvVolumeIDs(obj any) ([]string, error) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return nil, nil
	}
	switch {
	case pv.Spec.CSI != nil && pv.Spec.CSI.Driver == l.Driver:
		return []string{pv.Spec.CSI.VolumeHandle}, nil
	case pv.Spec.AWSElasticBlockStore != nil:
		return []string{path.Base(pv.Spec.AWSElasticBlockStore.VolumeID)}, nil
	}
	return nil, nil
}
