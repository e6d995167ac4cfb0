package reconciler

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// StaleCleaner is upstream's StaleAttachmentCleaner: on a period it drops workload UIDs whose Pod is gone and
// whose attachment is older than the stale age (events can be missed across restarts), and it asks
// Mountpoint Pods that no attachment names to unmount. It runs only on the leader.
type StaleCleaner struct {
	R        *Reconciler
	Interval time.Duration
}

// NeedLeaderElection makes the manager run the cleaner only while leading.
func (s *StaleCleaner) NeedLeaderElection() bool { return true }

// Start runs the cleaner until ctx ends.
func (s *StaleCleaner) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("stale-attachment-cleaner")
	ctx = klog.NewContext(ctx, logger)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := s.R.CleanStale(ctx); err != nil {
			logger.Error(err, "Stale attachment cleanup failed; retrying next period")
		}
	}, s.Interval)
	return nil
}

// CleanStale runs one pass of the stale cleaner.
func (r *Reconciler) CleanStale(ctx context.Context) error {
	list := &s3api.MountpointS3PodAttachmentList{}
	if err := r.client.List(ctx, list); err != nil {
		return err
	}
	now := r.now()
	referenced := map[string]bool{}
	for i := range list.Items {
		a := &list.Items[i]
		stale := map[string]bool{}
		for mp, ws := range a.Spec.MountpointS3PodAttachments {
			referenced[mp] = true
			for _, w := range ws {
				if now.Sub(w.AttachmentTime.Time) < r.staleAge {
					continue
				}
				pods := &corev1.PodList{}
				if err := r.client.List(ctx, pods, client.MatchingFields{indexPodUID: w.WorkloadPodUID}); err != nil {
					return err
				}
				if len(pods.Items) == 0 {
					stale[w.WorkloadPodUID] = true
				}
			}
		}
		if len(stale) == 0 {
			continue
		}
		klog.FromContext(ctx).Info("Removing workloads that no longer exist", "attachment", a.Name, "count", len(stale))
		unlock := r.locks.lock(sharingKey(&a.Spec))
		err := r.removeWorkloads(ctx, a, stale)
		unlock()
		if err != nil {
			return err
		}
	}
	if r.cfg.HeadroomEnabled() {
		if err := r.cleanStaleHeadroom(ctx); err != nil {
			return err
		}
	}
	return r.unmountOrphans(ctx, referenced, now)
}

// unmountOrphans annotates needs-unmount on live Mountpoint Pods no attachment names, once they are older
// than the stale age (a younger one may belong to an attachment the cache has not shown yet).
func (r *Reconciler) unmountOrphans(ctx context.Context, referenced map[string]bool, now time.Time) error {
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.InNamespace(r.cfg.Namespace)); err != nil {
		return err
	}
	for i := range pods.Items {
		mp := &pods.Items[i]
		if referenced[mp.Name] || mp.Labels[s3api.LabelMountedByVersion] == "" || mp.DeletionTimestamp != nil ||
			mp.Annotations[s3api.AnnotationNeedsUnmount] == "true" || now.Sub(mp.CreationTimestamp.Time) < r.staleAge ||
			mp.Status.Phase == corev1.PodSucceeded || mp.Status.Phase == corev1.PodFailed {
			continue
		}
		klog.FromContext(ctx).Info("Mountpoint Pod is in no attachment, asking it to unmount", "mountpointPod", mp.Name)
		if err := r.markNeedsUnmount(ctx, mp.Name); err != nil {
			return err
		}
	}
	return nil
}
