package reconciler

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// syncVolume converges one S3 volume of a workload: an active workload is in exactly one attachment with a
// Mountpoint Pod that exists; an inactive one is in none.
func (r *Reconciler) syncVolume(ctx context.Context, v *volume) error {
	sa, err := r.serviceAccount(ctx, v)
	if err != nil {
		return err
	}
	spec := v.attachmentSpec(sa)
	key := sharingKey(&spec)
	defer r.locks.lock(key)()
	uid := string(v.pod.UID)

	if !isActive(v.pod) {
		return r.removeWorkloadFrom(ctx, uid, func(a *s3api.MountpointS3PodAttachment) bool {
			return a.Spec.PersistentVolumeName == spec.PersistentVolumeName && a.Spec.NodeName == spec.NodeName
		})
	}
	s3pa, err := r.findAttachment(ctx, key)
	if err != nil {
		return err
	}
	if s3pa != nil {
		if mp := s3pa.MountpointPodFor(uid); mp != "" {
			return r.ensureMountpointPod(ctx, v, mp)
		}
	}
	// Already placed under another key (the PV's mount options changed since)? Then it stays there: the
	// node finds its Mountpoint Pod by UID, and a second one would be a second mount.
	other, err := r.attachmentHolding(ctx, uid, &spec)
	if err != nil {
		return err
	}
	if other != nil {
		return r.ensureMountpointPod(ctx, v, other.MountpointPodFor(uid))
	}
	if s3pa == nil && v.pod.Status.Phase == corev1.PodRunning {
		// Upstream's rule: a Running workload without an attachment was mounted by a v1 (systemd) driver.
		klog.FromContext(ctx).V(4).Info("Running workload without an attachment, assuming a legacy mount", "pv", spec.PersistentVolumeName)
		return nil
	}
	return r.assign(ctx, v, spec, key, s3pa)
}

// attachmentHolding returns an attachment of this node and PV that already holds the workload UID.
func (r *Reconciler) attachmentHolding(ctx context.Context, uid string, spec *s3api.MountpointS3PodAttachmentSpec) (*s3api.MountpointS3PodAttachment, error) {
	list := &s3api.MountpointS3PodAttachmentList{}
	if err := r.client.List(ctx, list, client.MatchingFields{indexWorkloadUID: uid}); err != nil {
		return nil, fmt.Errorf("list attachments of workload %s: %w", uid, err)
	}
	for i := range list.Items {
		a := &list.Items[i]
		if a.Spec.NodeName == spec.NodeName && a.Spec.PersistentVolumeName == spec.PersistentVolumeName {
			return a, nil
		}
	}
	return nil, nil
}

// assign adds the workload to the first Mountpoint Pod of the attachment that takes new workloads of its
// access, or names a new Mountpoint Pod in the attachment (creating the attachment if needed) and then
// creates that Pod. The attachment is written first, so a crash in between leaves a reference that
// ensureMountpointPod completes, never a Mountpoint Pod nobody points to.
func (r *Reconciler) assign(ctx context.Context, v *volume, spec s3api.MountpointS3PodAttachmentSpec, key string, s3pa *s3api.MountpointS3PodAttachment) error {
	logger := klog.FromContext(ctx)
	uid := string(v.pod.UID)
	entry := s3api.WorkloadPodAttachment{WorkloadPodUID: uid, AttachmentTime: metav1.NewTime(r.now())}
	if s3pa != nil {
		names := make([]string, 0, len(s3pa.Spec.MountpointS3PodAttachments))
		for name := range s3pa.Spec.MountpointS3PodAttachments {
			names = append(names, name)
		}
		slices.Sort(names) // upstream takes the "first" of a Go map; a fixed order makes reruns agree
		for _, name := range names {
			mp, err := r.getMountpointPod(ctx, name)
			if err != nil {
				return err
			}
			if mp == nil && len(s3pa.Spec.MountpointS3PodAttachments[name]) > 0 {
				// Named for workloads and not created yet: a predecessor's intent (or a deleted Pod) that the
				// reconcile of those workloads completes. A new Pod now would split one sharing group in two.
				return fmt.Errorf("mountpoint Pod %s of attachment %s is not created yet: waiting for it", name, s3pa.Name)
			}
			if mp != nil && r.takesWorkloads(mp, v.access) {
				if err := r.addWorkload(ctx, s3pa, name, entry); err != nil {
					return err
				}
				logger.V(2).Info("Workload joins a Mountpoint Pod", "mountpointPod", name, "attachment", s3pa.Name, "access", v.access)
				return nil
			}
		}
	}
	name := newMountpointPodName()
	if s3pa == nil {
		created, err := r.createAttachment(ctx, spec, name, entry)
		if err != nil {
			return err
		}
		r.expect.created(key, created.Name)
		logger.V(2).Info("Created attachment", "attachment", created.Name, "mountpointPod", name)
	} else if err := r.addWorkload(ctx, s3pa, name, entry); err != nil {
		return err
	}
	return r.createMountpointPod(ctx, v, name, "new")
}

// takesWorkloads is upstream's rule plus Stowage's access split: a live Mountpoint Pod of this controller's
// version, not being unmounted, serving the same access (read-only or read-write) as the workload.
func (r *Reconciler) takesWorkloads(mp *corev1.Pod, access Access) bool {
	return mp.DeletionTimestamp == nil &&
		mp.Status.Phase != corev1.PodSucceeded && mp.Status.Phase != corev1.PodFailed &&
		mp.Annotations[s3api.AnnotationNeedsUnmount] != "true" &&
		mp.Annotations[s3api.AnnotationNoNewWorkload] != "true" &&
		mp.Labels[s3api.LabelMountedByVersion] == r.cfg.CSIDriverVersion &&
		mp.Annotations[AnnotationAccess] == string(access)
}

// createAttachment creates an attachment holding one workload on one (named, maybe not yet created)
// Mountpoint Pod, as upstream's: generateName s3pa- and the created-by version label.
func (r *Reconciler) createAttachment(ctx context.Context, spec s3api.MountpointS3PodAttachmentSpec, mp string, entry s3api.WorkloadPodAttachment) (*s3api.MountpointS3PodAttachment, error) {
	spec.MountpointS3PodAttachments = map[string][]s3api.WorkloadPodAttachment{mp: {entry}}
	s3pa := &s3api.MountpointS3PodAttachment{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "s3pa-",
			Labels:       map[string]string{s3api.LabelCreatedByVersion: r.cfg.CSIDriverVersion},
		},
		Spec: spec,
	}
	if err := r.client.Create(ctx, s3pa); err != nil {
		return nil, fmt.Errorf("create attachment for PV %s on node %s: %w", spec.PersistentVolumeName, spec.NodeName, err)
	}
	return s3pa, nil
}

// addWorkload appends a workload to a Mountpoint Pod's list in one update, which the API server
// preconditions on the attachment's resourceVersion: a stale cached attachment fails with a conflict and is
// retried. Update, not patch, because upstream's RBAC grants only update on attachments and Mountpoint Pods.
func (r *Reconciler) addWorkload(ctx context.Context, s3pa *s3api.MountpointS3PodAttachment, mp string, entry s3api.WorkloadPodAttachment) error {
	next := s3pa.DeepCopy()
	if next.Spec.MountpointS3PodAttachments == nil {
		next.Spec.MountpointS3PodAttachments = map[string][]s3api.WorkloadPodAttachment{}
	}
	next.Spec.MountpointS3PodAttachments[mp] = append(next.Spec.MountpointS3PodAttachments[mp], entry)
	if err := r.client.Update(ctx, next); err != nil {
		return fmt.Errorf("add workload %s to attachment %s: %w", entry.WorkloadPodUID, s3pa.Name, err)
	}
	next.DeepCopyInto(s3pa)
	return nil
}
