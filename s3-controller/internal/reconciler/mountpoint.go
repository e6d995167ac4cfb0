package reconciler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// getMountpointPod returns a Mountpoint Pod, or nil if it does not exist. A Pod the cache does not have is
// asked of the API server, since this controller may have created it a moment ago.
func (r *Reconciler) getMountpointPod(ctx context.Context, name string) (*corev1.Pod, error) {
	key := types.NamespacedName{Namespace: r.cfg.Namespace, Name: name}
	pod := &corev1.Pod{}
	err := r.client.Get(ctx, key, pod)
	if apierrors.IsNotFound(err) {
		err = r.reader.Get(ctx, key, pod)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get Mountpoint Pod %s: %w", name, err)
	}
	return pod, nil
}

// ensureMountpointPod makes sure the Mountpoint Pod an active workload is assigned to exists. One that is gone
// (deleted by hand, evicted, or never created because the controller died after writing the attachment) is
// created again under the same name, so the attachment stays valid as it is
// (awslabs/mountpoint-s3-csi-driver#843).
func (r *Reconciler) ensureMountpointPod(ctx context.Context, v *volume, name string) error {
	mp, err := r.getMountpointPod(ctx, name)
	if err != nil || mp != nil {
		return err
	}
	klog.FromContext(ctx).Info("Mountpoint Pod of an active workload is missing, creating it again", "mountpointPod", name)
	return r.createMountpointPod(ctx, v, name, "repair")
}

// createMountpointPod creates the named Mountpoint Pod for a volume. AlreadyExists means an earlier attempt
// got through (a cache that had not caught up), which is success.
func (r *Reconciler) createMountpointPod(ctx context.Context, v *volume, name, reason string) error {
	pod, err := BuildMountpointPod(r.cfg, name, v.pod.Spec.NodeName, v.pv, v.access)
	if err != nil {
		return fmt.Errorf("build Mountpoint Pod for PV %s: %w", v.pv.Name, err)
	}
	if err := r.client.Create(ctx, pod); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("create Mountpoint Pod %s/%s: %w", r.cfg.Namespace, name, err)
	}
	r.metrics.created(reason)
	klog.FromContext(ctx).Info("Created Mountpoint Pod", "mountpointPod", name, "node", v.pod.Spec.NodeName,
		"pv", v.pv.Name, "access", v.access, "reason", reason)
	return nil
}

// reconcileMountpointPod deletes a Mountpoint Pod that succeeded (it unmounted and exited) and reports
// one that failed, as upstream does.
func (r *Reconciler) reconcileMountpointPod(ctx context.Context, mp *corev1.Pod) error {
	logger := klog.FromContext(ctx)
	switch mp.Status.Phase {
	case corev1.PodSucceeded:
		if mp.DeletionTimestamp != nil {
			return nil
		}
		uid, rv := mp.UID, mp.ResourceVersion
		err := r.client.Delete(ctx, mp, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("delete succeeded Mountpoint Pod %s: %w", mp.Name, err)
		}
		r.metrics.deleted()
		logger.Info("Deleted succeeded Mountpoint Pod", "mountpointPod", mp.Name)
	case corev1.PodFailed:
		logger.Info("Mountpoint Pod failed", "mountpointPod", mp.Name, "reason", mp.Status.Reason, "message", mp.Status.Message)
		r.events.Eventf(mp, nil, corev1.EventTypeWarning, "MountpointPodFailed", "Mount",
			"Mountpoint Pod failed: %s %s", mp.Status.Reason, mp.Status.Message)
	}
	return nil
}
