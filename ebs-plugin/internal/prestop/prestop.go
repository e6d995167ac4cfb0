// Package prestop is the node pod's preStop hook (`ebs-plugin pre-stop-hook`, upstream's
// `aws-ebs-csi-driver pre-stop-hook`): on a node that is being drained it holds the node plugin up until
// every EBS VolumeAttachment of the node is gone.
//
// Without it a drain stops the node plugin while workload pods are still unmounting, the unmount never
// happens, and the attach/detach controller waits six minutes before it force-detaches the volume, so the
// workload's replacement pod waits too. On a node that is not draining (a rolling update of the DaemonSet)
// the workloads stay, so the hook returns at once instead of delaying the update.
package prestop

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Taint keys that mark a node being drained, as upstream's hook recognises them.
const (
	// TaintClusterAutoscaler is set by cluster-autoscaler on a node it is about to delete.
	TaintClusterAutoscaler = "ToBeDeletedByClusterAutoscaler"
	// TaintKarpenter is Karpenter v1's taint on a node it disrupts.
	TaintKarpenter = "karpenter.sh/disrupted"
	// TaintKarpenterV1Beta1 is the same taint of Karpenter v1beta1, still running in older clusters.
	TaintKarpenterV1Beta1 = "karpenter.sh/disruption"
)

// Draining reports whether node carries a taint that means it is being drained: kubectl drain's cordon
// (node.kubernetes.io/unschedulable, which the node lifecycle controller adds for spec.unschedulable) or an
// autoscaler's. The effect does not matter, as upstream.
func Draining(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		switch t.Key {
		case corev1.TaintNodeUnschedulable, TaintClusterAutoscaler, TaintKarpenter, TaintKarpenterV1Beta1:
			return true
		}
	}
	return false
}

// Run is the hook: it reads nodeName's Node and, when the node is draining or already deleted, waits until
// no VolumeAttachment of driver names the node. The wait ends with ctx, whose end (the kubelet killing the
// hook at terminationGracePeriodSeconds, or a signal) is returned as an error naming what was left.
func Run(ctx context.Context, client kubernetes.Interface, nodeName, driver string) error {
	logger := klog.FromContext(ctx).WithValues("node", nodeName)
	if nodeName == "" {
		return errors.New("no node name: set CSI_NODE_NAME")
	}
	node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// The Node object goes first when a node is terminated; its volumes may still be detaching.
		logger.Info("Node not found, assuming it is terminating; waiting for its VolumeAttachments")
	case err != nil:
		return fmt.Errorf("reading Node %s: %w", nodeName, err)
	case !Draining(node):
		logger.Info("Node is not being drained; not waiting for VolumeAttachments")
		return nil
	default:
		logger.Info("Node is being drained; waiting for its VolumeAttachments to be deleted")
	}
	return WaitForDetach(ctx, client, nodeName, driver)
}

// WaitForDetach returns once no VolumeAttachment with spec.attacher driver names nodeName, or with an error
// when ctx ends first. It watches VolumeAttachments (an informer: one list, then a watch), so it reacts to
// the last deletion at once without polling the API server.
func WaitForDetach(ctx context.Context, client kubernetes.Interface, nodeName, driver string) error {
	logger := klog.FromContext(ctx).WithValues("node", nodeName)
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(client, 0)
	// Deferred in this order so the informer is told to stop before Shutdown waits for it.
	defer factory.Shutdown()
	defer cancel()

	informer := factory.Storage().V1().VolumeAttachments().Informer()
	// changed wakes the loop below after any event; one pending wake-up is enough because the loop reads the
	// whole cache each time.
	changed := make(chan struct{}, 1)
	wake := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { wake() },
		UpdateFunc: func(any, any) { wake() },
		DeleteFunc: func(any) { wake() },
	}); err != nil {
		return fmt.Errorf("watching VolumeAttachments: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return fmt.Errorf("listing VolumeAttachments of node %s: %w", nodeName, context.Cause(ctx))
	}

	var left []string
	for {
		left = remaining(informer.GetStore().List(), nodeName, driver)
		if len(left) == 0 {
			logger.Info("No VolumeAttachments left on the node")
			return nil
		}
		logger.V(2).Info("Waiting for VolumeAttachments to be deleted", "volumeAttachments", left)
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s still has VolumeAttachments %v: %w", nodeName, left, context.Cause(ctx))
		case <-changed:
		}
	}
}

// remaining names the VolumeAttachments in objs of driver on nodeName, sorted.
func remaining(objs []any, nodeName, driver string) []string {
	var names []string
	for _, o := range objs {
		va, ok := o.(*storagev1.VolumeAttachment)
		if ok && va.Spec.NodeName == nodeName && va.Spec.Attacher == driver {
			names = append(names, va.Name)
		}
	}
	slices.Sort(names)
	return names
}
