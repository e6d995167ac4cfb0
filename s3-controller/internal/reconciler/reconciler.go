// Package reconciler is s3-controller's logic: it gives each S3 volume of a scheduled workload Pod a
// Mountpoint Pod, shared through MountpointS3PodAttachment objects exactly as upstream's controller does,
// and tears them down when the workloads go.
package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stowage-csi/stowage/s3-controller/internal/config"
)

// Name names the controller in logs and metrics, as upstream's.
const Name = "aws-s3-csi-controller"

// notBoundRetry is how soon a workload whose claim is not bound yet is looked at again.
const notBoundRetry = 2 * time.Second

// Request names a Pod and the UID it had when its event came: a workload that is gone by the time it is
// reconciled is still removed from its attachments at once, instead of by the stale cleaner minutes later.
type Request struct {
	types.NamespacedName
	UID types.UID
}

// Options are what New needs.
type Options struct {
	// Client reads from the informer cache and writes to the API server.
	Client client.Client
	// Reader reads the API server directly, for objects the cache may not have seen yet.
	Reader client.Reader
	Config config.MountpointPod
	Events events.EventRecorder
	// Metrics may be nil (tests).
	Metrics *Metrics
	// Now is the clock of attachment times and stale checks; nil means time.Now.
	Now func() time.Time
	// StaleAge is how old an attachment must be before the stale cleaner drops it.
	StaleAge time.Duration
}

// Reconciler reconciles workload Pods and Mountpoint Pods.
type Reconciler struct {
	client   client.Client
	reader   client.Reader
	cfg      config.MountpointPod
	events   events.EventRecorder
	metrics  *Metrics
	now      func() time.Time
	staleAge time.Duration
	locks    keyedMutex
	expect   *expectations
}

// New returns a Reconciler.
func New(o Options) *Reconciler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	if o.StaleAge == 0 {
		o.StaleAge = config.DefaultStaleInterval
	}
	return &Reconciler{client: o.Client, reader: o.Reader, cfg: o.Config, events: o.Events, metrics: o.Metrics,
		now: o.Now, staleAge: o.StaleAge, expect: &expectations{}}
}

// Reconcile converges one Pod: a Mountpoint Pod (in the Mountpoint namespace) or a workload Pod.
func (r *Reconciler) Reconcile(ctx context.Context, req Request) (reconcile.Result, error) {
	logger := klog.FromContext(ctx).WithValues("pod", req.NamespacedName)
	ctx = klog.NewContext(ctx, logger)
	pod := &corev1.Pod{}
	err := r.client.Get(ctx, req.NamespacedName, pod)
	if apierrors.IsNotFound(err) || (err == nil && req.UID != "" && pod.UID != req.UID) {
		if req.Namespace == r.cfg.Namespace || req.UID == "" {
			return reconcile.Result{}, nil
		}
		// The workload this event was about is gone (a Pod with its name may be a new one).
		if r.cfg.HeadroomEnabled() {
			if err := r.releaseHeadroom(ctx, string(req.UID)); err != nil {
				return reconcile.Result{}, err
			}
		}
		return reconcile.Result{}, r.workloadGone(ctx, string(req.UID))
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("get pod %s: %w", req.NamespacedName, err)
	}
	if pod.Namespace == r.cfg.Namespace {
		return reconcile.Result{}, r.reconcileMountpointPod(ctx, pod)
	}
	return r.reconcileWorkload(ctx, pod)
}

// reconcileWorkload converges each S3 volume (claim or inline) of a scheduled workload Pod.
func (r *Reconciler) reconcileWorkload(ctx context.Context, pod *corev1.Pod) (reconcile.Result, error) {
	if r.cfg.HeadroomEnabled() {
		if pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && gated(pod) {
			return r.reserveHeadroom(ctx, pod)
		}
		if pod.Labels[labelHeadroomForWorkload] != "" && pod.Status.Phase != corev1.PodPending && pod.Status.Phase != "" {
			if err := r.releaseHeadroom(ctx, string(pod.UID)); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	if pod.Spec.NodeName == "" {
		return reconcile.Result{}, nil
	}
	var result reconcile.Result
	var errs []error
	for i := range pod.Spec.Volumes {
		var v *volume
		var err error
		switch vol := &pod.Spec.Volumes[i]; {
		case vol.PersistentVolumeClaim != nil:
			v, err = r.resolve(ctx, pod, vol.PersistentVolumeClaim)
			if errors.Is(err, errNotBound) {
				klog.FromContext(ctx).V(4).Info("Claim not bound yet, requeuing", "pvc", vol.PersistentVolumeClaim.ClaimName)
				result.RequeueAfter = notBoundRetry
				continue
			}
		case vol.CSI != nil:
			if v, err = inlineVolume(pod, vol); err != nil {
				// A refused inline volume is the Pod's spec, which retries cannot change: an Event, no error.
				r.events.Eventf(pod, nil, corev1.EventTypeWarning, "MountpointPodAttachmentFailed", "Attach", "%v", err)
				continue
			}
		default:
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if v == nil {
			continue // not an S3 volume
		}
		if err := r.syncVolume(ctx, v); err != nil {
			errs = append(errs, fmt.Errorf("volume %s (PV %s): %w", pod.Spec.Volumes[i].Name, v.pv.Name, err))
			if !apierrors.IsConflict(err) {
				r.events.Eventf(pod, nil, corev1.EventTypeWarning, "MountpointPodAttachmentFailed", "Attach",
					"PV %s: %v", v.pv.Name, err)
			}
		}
	}
	return result, errors.Join(errs...)
}

// isActive is upstream's rule: Running (even while terminating), or Pending and not terminating.
func isActive(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodRunning:
		return true
	case corev1.PodPending, "":
		return pod.DeletionTimestamp == nil
	}
	return false
}
