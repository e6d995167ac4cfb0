package kubeletsim

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// syncPod converges one Pod: volumes set up and the Pod Running, or, once it is being deleted, volumes torn
// down and the deletion finished.
func (n *Node) syncPod(ctx context.Context, key string) error {
	ns, name, ok := strings.Cut(key, "/")
	if !ok {
		return nil
	}
	pod, err := n.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Deleted without us (force deletion): the kubelet still cleans up after it.
		return n.tearDownPod(ctx, key)
	}
	if err != nil {
		return err
	}
	if ps := n.state.pod(key); ps != nil && ps.uid != pod.UID {
		if err := n.tearDownPod(ctx, key); err != nil {
			return err
		}
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		if r := n.runs.get(key); r != nil {
			// Volumes stay until the containers using them are gone; their exit queues the Pod again.
			r.kill(n.gracePeriod(pod))
			if !r.exited() {
				return waiting("containers of pod %s are being killed", key)
			}
		}
		if err := n.tearDownPod(ctx, key); err != nil {
			return err
		}
		if pod.DeletionTimestamp == nil {
			return nil
		}
		err := n.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To(int64(0)), Preconditions: &metav1.Preconditions{UID: &pod.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("finish deletion of pod %s: %w", key, err)
		}
		n.log.V(2).Info("Pod deleted", "pod", key)
		return nil
	}

	vols, err := n.resolveVolumes(pod)
	if err != nil {
		return err
	}
	ps := n.state.want(key, pod.UID, vols)
	if err := n.reportInUse(ctx); err != nil {
		return err
	}
	driver, err := n.csiDriver()
	if err != nil {
		return err
	}
	for _, pv := range n.state.snapshot(ps) {
		if err := n.setUp(ctx, pod, pv, driver); err != nil {
			return err
		}
	}
	if n.runsContainers(pod) {
		if err := n.syncContainers(ctx, pod, key); err != nil {
			return err
		}
	} else if pod.Status.Phase != v1.PodRunning {
		if err := n.markRunning(ctx, pod); err != nil {
			return err
		}
		n.log.V(2).Info("Pod running", "pod", key)
	}
	for _, pv := range n.state.snapshot(ps) {
		if err := n.expandIfNeeded(ctx, pv); err != nil {
			return err
		}
	}
	return nil
}

// csiDriver is the plugin's CSIDriver object, or nil if there is none.
func (n *Node) csiDriver() (*storagev1.CSIDriver, error) {
	d, err := n.drivers.Get(n.driver)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return d, err
}

// resolveVolumes lists the Pod's volumes that belong to this node's plugin: claims (including generic
// ephemeral volumes, whose claim is <pod>-<volume>) bound to its CSI volumes, and inline csi: volumes.
// Other volume types (the projected API access volume, emptyDir...) need no CSI work and are skipped.
func (n *Node) resolveVolumes(pod *v1.Pod) ([]*volume, error) {
	var out []*volume
	for _, pv := range pod.Spec.Volumes {
		var claimName string
		readOnly := false
		switch {
		case pv.PersistentVolumeClaim != nil:
			claimName, readOnly = pv.PersistentVolumeClaim.ClaimName, pv.PersistentVolumeClaim.ReadOnly
		case pv.Ephemeral != nil:
			claimName = pod.Name + "-" + pv.Name
		case pv.CSI != nil:
			if pv.CSI.Driver != n.driver {
				continue
			}
			driver, err := n.csiDriver()
			if err != nil {
				return nil, err
			}
			if driver != nil && !hasLifecycleMode(driver, storagev1.VolumeLifecycleEphemeral) {
				return nil, fmt.Errorf("pod %s/%s volume %s: CSIDriver %s does not support ephemeral inline volumes", pod.Namespace, pod.Name, pv.Name, n.driver)
			}
			out = append(out, volumeFromInline(pod, pv))
			continue
		default:
			continue
		}
		claim, err := n.claims.PersistentVolumeClaims(pod.Namespace).Get(claimName)
		if apierrors.IsNotFound(err) {
			return nil, waiting("claim %s/%s does not exist", pod.Namespace, claimName)
		}
		if err != nil {
			return nil, err
		}
		// The kubelet uses a generic ephemeral volume's claim only if the Pod controls it: a claim of that
		// name made by someone else must not be mounted into the Pod (and deleted with it).
		if pv.Ephemeral != nil && !metav1.IsControlledBy(claim, pod) {
			return nil, fmt.Errorf("PVC %s/%s was not created for pod %s/%s (pod is not owner)", pod.Namespace, claimName, pod.Namespace, pod.Name)
		}
		if claim.Spec.VolumeName == "" || claim.Status.Phase != v1.ClaimBound {
			return nil, waiting("claim %s/%s is not bound", pod.Namespace, claimName)
		}
		pvObj, err := n.volumes.Get(claim.Spec.VolumeName)
		if apierrors.IsNotFound(err) {
			return nil, waiting("persistentvolume %s of claim %s/%s is not in the cache", claim.Spec.VolumeName, pod.Namespace, claimName)
		}
		if err != nil {
			return nil, err
		}
		if pvObj.Spec.CSI == nil || pvObj.Spec.CSI.Driver != n.driver {
			continue
		}
		v, err := volumeFromPV(pv.Name, pvObj, claimName, readOnly)
		if err != nil {
			return nil, err
		}
		v.namespace = pod.Namespace
		out = append(out, v)
	}
	return out, nil
}

func hasLifecycleMode(d *storagev1.CSIDriver, mode storagev1.VolumeLifecycleMode) bool {
	modes := d.Spec.VolumeLifecycleModes
	if len(modes) == 0 {
		return mode == storagev1.VolumeLifecyclePersistent
	}
	for _, m := range modes {
		if m == mode {
			return true
		}
	}
	return false
}

// syncContainers sets up the Pod's emptyDirs, starts its containers once, and reports their status.
func (n *Node) syncContainers(ctx context.Context, pod *v1.Pod, key string) error {
	if err := n.setUpEmptyDirs(pod); err != nil {
		return err
	}
	r, err := n.startContainers(pod, key)
	if err != nil {
		return err
	}
	_, err = n.reportContainers(ctx, pod, r)
	return err
}
