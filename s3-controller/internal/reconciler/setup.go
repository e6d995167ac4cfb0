package reconciler

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/stowage-csi/stowage/shared/s3api"
)

type queue = workqueue.TypedRateLimitingInterface[Request]

// SetupWithManager registers the controller: every Pod event enqueues that Pod (with its UID); a Mountpoint
// Pod's deletion and an attachment's deletion also enqueue the workloads they served, so a lost Mountpoint
// Pod or attachment is repaired at once rather than at the workloads' next change.
func (r *Reconciler) SetupWithManager(mgr manager.Manager, workers int) error {
	pods := handler.TypedFuncs[*corev1.Pod, Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*corev1.Pod], q queue) { q.Add(requestFor(e.Object)) },
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*corev1.Pod], q queue) {
			q.Add(requestFor(e.ObjectNew))
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[*corev1.Pod], q queue) {
			q.Add(requestFor(e.Object))
			if e.Object.Namespace == r.cfg.Namespace {
				r.enqueueWorkloads(ctx, q, client.MatchingFields{indexMountpointPod: e.Object.Name})
			}
		},
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[*corev1.Pod], q queue) { q.Add(requestFor(e.Object)) },
	}
	attachments := handler.TypedFuncs[*s3api.MountpointS3PodAttachment, Request]{
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[*s3api.MountpointS3PodAttachment], q queue) {
			r.enqueueAttachmentWorkloads(ctx, q, e.Object)
		},
	}
	return builder.TypedControllerManagedBy[Request](mgr).
		Named(Name).
		WithOptions(controller.TypedOptions[Request]{MaxConcurrentReconciles: workers}).
		WatchesRawSource(source.TypedKind(mgr.GetCache(), &corev1.Pod{}, handler.TypedEventHandler[*corev1.Pod, Request](pods))).
		WatchesRawSource(source.TypedKind(mgr.GetCache(), &s3api.MountpointS3PodAttachment{},
			handler.TypedEventHandler[*s3api.MountpointS3PodAttachment, Request](attachments))).
		Complete(r)
}

func requestFor(pod *corev1.Pod) Request {
	return Request{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, UID: pod.UID}
}

// enqueueWorkloads enqueues the workloads of the attachments matching sel.
func (r *Reconciler) enqueueWorkloads(ctx context.Context, q queue, sel client.MatchingFields) {
	list := &s3api.MountpointS3PodAttachmentList{}
	if err := r.client.List(ctx, list, sel); err != nil {
		klog.FromContext(ctx).Error(err, "List attachments to requeue their workloads")
		return
	}
	for i := range list.Items {
		r.enqueueAttachmentWorkloads(ctx, q, &list.Items[i])
	}
}

// enqueueAttachmentWorkloads enqueues the Pods whose UIDs an attachment holds.
func (r *Reconciler) enqueueAttachmentWorkloads(ctx context.Context, q queue, a *s3api.MountpointS3PodAttachment) {
	for _, ws := range a.Spec.MountpointS3PodAttachments {
		for _, w := range ws {
			pods := &corev1.PodList{}
			if err := r.client.List(ctx, pods, client.MatchingFields{indexPodUID: w.WorkloadPodUID}); err != nil {
				klog.FromContext(ctx).Error(err, "List workload to requeue it", "uid", w.WorkloadPodUID)
				continue
			}
			for i := range pods.Items {
				q.Add(requestFor(&pods.Items[i]))
			}
		}
	}
}
