package reconciler

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Upstream's experimental headroom names (awslabs/mountpoint-s3-csi-driver, docs/HEADROOM_FOR_MPPOD.md).
const (
	// GateReserveHeadroom on a workload asks the controller to reserve room for its Mountpoint Pods first.
	GateReserveHeadroom      = "s3.csi.aws.com/reserve-headroom-for-mppod"
	labelHeadroomForWorkload = "s3.csi.aws.com/headroom-for-workload"
	labelHeadroomForPod      = "s3.csi.aws.com/headroom-for-pod"
	labelHeadroomForVolume   = "s3.csi.aws.com/headroom-for-volume"
)

// headroomPodName is upstream's: "hr-" and the hex SHA-224 of the workload UID and the PV name.
func headroomPodName(uid, pv string) string {
	return fmt.Sprintf("hr-%x", sha256.Sum224([]byte(uid+pv)))
}

func gated(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == GateReserveHeadroom })
}

// reserveHeadroom handles a workload gated for headroom: a pause Pod per S3 volume, with the Mountpoint Pod's
// resources and the low headroom priority, that must land on the workload's node (pod affinity to the
// workload's headroom label); then one patch labels the workload and removes the gate. The Mountpoint Pod,
// with the preempting priority, later evicts the pause Pod if the node has no other room.
func (r *Reconciler) reserveHeadroom(ctx context.Context, pod *corev1.Pod) (reconcile.Result, error) {
	for i := range pod.Spec.Volumes {
		claim := pod.Spec.Volumes[i].PersistentVolumeClaim
		if claim == nil {
			continue
		}
		v, err := r.resolve(ctx, pod, claim)
		if errors.Is(err, errNotBound) {
			return reconcile.Result{RequeueAfter: notBoundRetry}, nil
		}
		if err != nil || v == nil {
			if err != nil {
				return reconcile.Result{}, err
			}
			continue
		}
		hr, err := r.buildHeadroomPod(v)
		if err != nil {
			return reconcile.Result{}, err
		}
		if err := r.client.Create(ctx, hr); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("create headroom Pod %s for PV %s: %w", hr.Name, v.pv.Name, err)
		}
	}
	next := pod.DeepCopy()
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	next.Labels[labelHeadroomForWorkload] = string(pod.UID)
	next.Spec.SchedulingGates = slices.DeleteFunc(next.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == GateReserveHeadroom })
	// A patch, as upstream: its RBAC grants patch (not update) on workload Pods for this feature.
	if err := r.client.Patch(ctx, next, client.MergeFromWithOptions(pod, client.MergeFromWithOptimisticLock{})); err != nil {
		return reconcile.Result{}, fmt.Errorf("ungate workload %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Reserved headroom and ungated workload")
	return reconcile.Result{}, nil
}

func (r *Reconciler) buildHeadroomPod(v *volume) (*corev1.Pod, error) {
	// The Mountpoint Pod's resources, so the headroom holds what the Mountpoint Pod will need.
	mp, err := BuildMountpointPod(r.cfg, "", v.pod.Spec.NodeName, v.pv, v.access)
	if err != nil {
		return nil, err
	}
	uid := string(v.pod.UID)
	labels := maps.Clone(r.cfg.HeadroomPodLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[labelHeadroomForPod], labels[labelHeadroomForVolume] = uid, v.pv.Name
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: headroomPodName(uid, v.pv.Name), Namespace: r.cfg.Namespace, Labels: labels},
		Spec: corev1.PodSpec{
			PriorityClassName: r.cfg.HeadroomPriorityClassName,
			Affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: labelHeadroomForWorkload, Operator: metav1.LabelSelectorOpIn, Values: []string{uid}}}},
				Namespaces:  []string{v.pod.Namespace},
				TopologyKey: corev1.LabelHostname,
			}}}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "pause", Image: r.cfg.HeadroomImage, Resources: mp.Spec.Containers[0].Resources,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true),
					Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
			}},
		},
	}, nil
}

// releaseHeadroom deletes the headroom Pods of a workload UID once it is past Pending (or gone).
func (r *Reconciler) releaseHeadroom(ctx context.Context, uid string) error {
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.InNamespace(r.cfg.Namespace), client.MatchingLabels{labelHeadroomForPod: uid}); err != nil {
		return fmt.Errorf("list headroom Pods of %s: %w", uid, err)
	}
	for i := range pods.Items {
		hr := &pods.Items[i]
		if err := r.client.Delete(ctx, hr, client.Preconditions{UID: &hr.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete headroom Pod %s: %w", hr.Name, err)
		}
		klog.FromContext(ctx).V(2).Info("Deleted headroom Pod", "headroomPod", hr.Name)
	}
	return nil
}

// cleanStaleHeadroom deletes headroom Pods whose workload no longer exists.
func (r *Reconciler) cleanStaleHeadroom(ctx context.Context) error {
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.InNamespace(r.cfg.Namespace), client.HasLabels{labelHeadroomForPod}); err != nil {
		return err
	}
	for i := range pods.Items {
		uid := pods.Items[i].Labels[labelHeadroomForPod]
		workloads := &corev1.PodList{}
		if err := r.client.List(ctx, workloads, client.MatchingFields{indexPodUID: uid}); err != nil {
			return err
		}
		if len(workloads.Items) == 0 || workloads.Items[0].Status.Phase != corev1.PodPending {
			if err := r.releaseHeadroom(ctx, uid); err != nil {
				return err
			}
		}
	}
	return nil
}
