package reconciler

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// workloadGone removes a deleted workload from every attachment holding it.
func (r *Reconciler) workloadGone(ctx context.Context, uid string) error {
	return r.removeWorkloadFrom(ctx, uid, func(*s3api.MountpointS3PodAttachment) bool { return true })
}

// removeWorkloadFrom removes a workload UID from the attachments that hold it and match.
func (r *Reconciler) removeWorkloadFrom(ctx context.Context, uid string, match func(*s3api.MountpointS3PodAttachment) bool) error {
	list := &s3api.MountpointS3PodAttachmentList{}
	if err := r.client.List(ctx, list, client.MatchingFields{indexWorkloadUID: uid}); err != nil {
		return fmt.Errorf("list attachments of workload %s: %w", uid, err)
	}
	for i := range list.Items {
		if a := &list.Items[i]; match(a) {
			if err := r.removeWorkloads(ctx, a, map[string]bool{uid: true}); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeWorkloads drops the given workload UIDs from an attachment. A Mountpoint Pod left without workloads
// is first annotated needs-unmount (so the node unmounts it and it exits) and then dropped from the map;
// an attachment left empty is deleted. The annotation comes first: a crash after it and before the
// attachment write is redone on the next pass, whereas the other order could leave a Mountpoint Pod
// nobody would ever tell to unmount.
func (r *Reconciler) removeWorkloads(ctx context.Context, a *s3api.MountpointS3PodAttachment, uids map[string]bool) error {
	logger := klog.FromContext(ctx)
	next := a.DeepCopy()
	changed := false
	var emptied []string
	for mp, ws := range next.Spec.MountpointS3PodAttachments {
		kept := ws[:0:0]
		for _, w := range ws {
			if uids[w.WorkloadPodUID] {
				changed = true
				continue
			}
			kept = append(kept, w)
		}
		next.Spec.MountpointS3PodAttachments[mp] = kept
		if len(kept) == 0 {
			emptied = append(emptied, mp)
		}
	}
	if !changed && len(emptied) == 0 {
		return nil
	}
	if len(emptied) > 0 {
		if err := r.ensureCurrent(ctx, a); err != nil {
			return err
		}
	}
	for _, mp := range emptied {
		if err := r.markNeedsUnmount(ctx, mp); err != nil {
			return err
		}
		delete(next.Spec.MountpointS3PodAttachments, mp)
	}
	if len(next.Spec.MountpointS3PodAttachments) == 0 {
		if err := r.deleteAttachment(ctx, a); err != nil {
			return err
		}
		logger.V(2).Info("Deleted empty attachment", "attachment", a.Name)
		return nil
	}
	if err := r.client.Update(ctx, next); err != nil {
		return fmt.Errorf("remove workloads from attachment %s: %w", a.Name, err)
	}
	logger.V(2).Info("Removed workloads from attachment", "attachment", a.Name, "unmounting", emptied)
	return nil
}

// markNeedsUnmount annotates a Mountpoint Pod s3.csi.aws.com/needs-unmount=true in one update (preconditioned
// on its resourceVersion; upstream's RBAC has update, not patch, on Mountpoint Pods). A Pod that is gone
// needs nothing.
func (r *Reconciler) markNeedsUnmount(ctx context.Context, name string) error {
	mp, err := r.getMountpointPod(ctx, name)
	if err != nil || mp == nil {
		return err
	}
	if mp.Annotations[s3api.AnnotationNeedsUnmount] == "true" {
		return nil
	}
	next := mp.DeepCopy()
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[s3api.AnnotationNeedsUnmount] = "true"
	err = r.client.Update(ctx, next)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("annotate Mountpoint Pod %s %s: %w", name, s3api.AnnotationNeedsUnmount, err)
	}
	klog.FromContext(ctx).V(2).Info("Mountpoint Pod has no workloads left, asked to unmount", "mountpointPod", name)
	return nil
}

// ensureCurrent fails with a conflict unless the API server still has this version of the attachment. Asking
// a Mountpoint Pod to unmount cannot be undone, so it is decided on the current attachment only: a cached
// one that lags behind this controller's own last write may miss a workload just added to that Pod.
func (r *Reconciler) ensureCurrent(ctx context.Context, a *s3api.MountpointS3PodAttachment) error {
	live := &s3api.MountpointS3PodAttachment{}
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(a), live); err != nil {
		return fmt.Errorf("get attachment %s: %w", a.Name, err)
	}
	if live.ResourceVersion != a.ResourceVersion {
		return apierrors.NewConflict(s3api.GroupVersionResource().GroupResource(), a.Name,
			fmt.Errorf("cached version %s is behind %s", a.ResourceVersion, live.ResourceVersion))
	}
	return nil
}
