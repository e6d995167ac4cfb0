package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/patch"
	"github.com/stowage-csi/stowage/snapshotter/internal/controller/opmetrics"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// syncSnapshot converges one VolumeSnapshot, in upstream's order: release the source claim if no snapshot of it
// is still being taken, handle a deletion, validate, settle the class, add the finalizers, then bind or check
// the binding.
func (c *Controller) syncSnapshot(ctx context.Context, vs *snapv1.VolumeSnapshot) error {
	if err := c.releaseClaim(ctx, vs, false); err != nil {
		klog.FromContext(ctx).Error(err, "Releasing the source claim failed")
		c.cfg.Events.Event(vs, v1.EventTypeWarning, "ErrorPVCFinalizer", "Error check and remove PVC Finalizer for VolumeSnapshot")
	}
	if vs.DeletionTimestamp != nil {
		return c.deleteSnapshot(ctx, vs)
	}
	if isGroupMember(vs) {
		return c.syncMember(ctx, vs)
	}
	src := vs.Spec.Source
	if (src.PersistentVolumeClaimName == nil) == (src.VolumeSnapshotContentName == nil) {
		//lint:ignore ST1005 upstream's message, which users and tools match
		err := errors.New("Exactly one of PersistentVolumeClaimName and VolumeSnapshotContentName should be specified")
		c.errorStatus(ctx, vs, true, v1.EventTypeWarning, "SnapshotValidationError", err.Error())
		return fmt.Errorf("volumesnapshot %s/%s spec.source: %w", vs.Namespace, vs.Name, err)
	}
	in, err := c.resolveClass(ctx, vs)
	if err != nil {
		return err
	}
	vs = in.vs
	if vs, err = c.addSnapshotFinalizers(ctx, vs, in.class); err != nil {
		c.cfg.Events.Event(vs, v1.EventTypeWarning, "SnapshotFinalizerError", fmt.Sprintf("Failed to check and update snapshot: %s", err))
		return err
	}
	in.vs = vs
	if !isReady(vs) || !isBound(vs) {
		return c.syncUnready(ctx, in)
	}
	return c.syncReady(ctx, vs)
}

// createInput is what a dynamic snapshot's content is made from, gathered once per sync so the claim's volume
// is read from the API server at most once.
type createInput struct {
	vs    *snapv1.VolumeSnapshot
	class *snapv1.VolumeSnapshotClass
	pv    *v1.PersistentVolume
}

// resolveClass returns the snapshot's class, choosing and recording its driver's default class when a dynamic
// snapshot names none. A pre-provisioned snapshot needs no class.
func (c *Controller) resolveClass(ctx context.Context, vs *snapv1.VolumeSnapshot) (createInput, error) {
	in := createInput{vs: vs}
	if name := vs.Spec.VolumeSnapshotClassName; name != nil {
		class, err := c.classes.Get(*name)
		if err != nil {
			c.errorStatus(ctx, vs, false, v1.EventTypeWarning, "GetSnapshotClassFailed", fmt.Sprintf("Failed to get snapshot class with error %v", err))
			return in, fmt.Errorf("volumesnapshot %s/%s spec.volumeSnapshotClassName %q: %w", vs.Namespace, vs.Name, *name, err)
		}
		in.class = class
		return in, nil
	}
	if vs.Spec.Source.VolumeSnapshotContentName != nil {
		return in, nil
	}
	class, pv, err := c.defaultClass(ctx, vs)
	if err != nil {
		c.errorStatus(ctx, vs, false, v1.EventTypeWarning, "SetDefaultSnapshotClassFailed", fmt.Sprintf("Failed to set default snapshot class with error %v", err))
		return in, fmt.Errorf("volumesnapshot %s/%s: default class: %w", vs.Namespace, vs.Name, err)
	}
	in.pv = pv
	updated, err := patch.RetryOnConflict(ctx, vs, c.getSnapshot(vs), func(ctx context.Context, vs *snapv1.VolumeSnapshot) (*snapv1.VolumeSnapshot, error) {
		return patch.Mutate(ctx, c.snapshotPatch(vs.Namespace), vs, func(vs *snapv1.VolumeSnapshot) {
			vs.Spec.VolumeSnapshotClassName = &class.Name
		})
	})
	if err != nil {
		return in, fmt.Errorf("volumesnapshot %s/%s: recording default class %s: %w", vs.Namespace, vs.Name, class.Name, err)
	}
	in.vs, in.class = updated, class
	return in, nil
}

// defaultClass finds the one class marked default for the driver of the snapshot's source volume.
func (c *Controller) defaultClass(ctx context.Context, vs *snapv1.VolumeSnapshot) (*snapv1.VolumeSnapshotClass, *v1.PersistentVolume, error) {
	pv, err := c.sourceVolume(ctx, vs)
	if err != nil {
		return nil, nil, err
	}
	if pv.Spec.CSI == nil {
		return nil, nil, fmt.Errorf("snapshotting non-CSI volumes is not supported, snapshot:%s/%s", vs.Namespace, vs.Name)
	}
	classes, err := c.classes.List(everything)
	if err != nil {
		return nil, nil, err
	}
	var defaults []*snapv1.VolumeSnapshotClass
	for _, class := range classes {
		if class.Annotations[snapapi.AnnDefaultClass] == "true" && class.Driver == pv.Spec.CSI.Driver {
			defaults = append(defaults, class)
		}
	}
	switch len(defaults) {
	case 0:
		return nil, nil, errors.New("cannot find default snapshot class")
	case 1:
		return defaults[0], pv, nil
	default:
		return nil, nil, fmt.Errorf("%d default snapshot classes were found", len(defaults))
	}
}

// addSnapshotFinalizers adds, in one patch, the as-source finalizer and, when the snapshot's content will be
// deleted with it (policy Delete), the bound finalizer. Upstream adds them in two writes, the second once the
// content exists; adding it with the class's policy up front is equivalent, since a snapshot deleted before its
// content exists has nothing to wait for and drops it at once.
func (c *Controller) addSnapshotFinalizers(ctx context.Context, vs *snapv1.VolumeSnapshot, class *snapv1.VolumeSnapshotClass) (*snapv1.VolumeSnapshot, error) {
	policy, err := c.expectedPolicy(vs, class)
	if err != nil {
		return vs, err
	}
	want := []string{snapapi.SnapshotAsSourceFinalizer}
	if policy == snapv1.VolumeSnapshotContentDelete {
		want = append(want, snapapi.SnapshotBoundFinalizer)
	}
	if !missingAny(vs.Finalizers, want) {
		return vs, nil
	}
	return patch.RetryOnConflict(ctx, vs, c.getSnapshot(vs), func(ctx context.Context, vs *snapv1.VolumeSnapshot) (*snapv1.VolumeSnapshot, error) {
		return patch.Mutate(ctx, c.snapshotPatch(vs.Namespace), vs, func(vs *snapv1.VolumeSnapshot) {
			for _, f := range want {
				if !slices.Contains(vs.Finalizers, f) {
					vs.Finalizers = append(vs.Finalizers, f)
				}
			}
		})
	})
}

// expectedPolicy is the deletion policy of the snapshot's content: the existing content's, else (dynamic) the
// class's. "" means not known yet.
func (c *Controller) expectedPolicy(vs *snapv1.VolumeSnapshot, class *snapv1.VolumeSnapshotClass) (snapv1.DeletionPolicy, error) {
	name := dynamicContentName(vs)
	if n := vs.Spec.Source.VolumeSnapshotContentName; n != nil {
		name = *n
	}
	content, err := c.content(name)
	switch {
	case err == nil:
		if refersTo(content, vs) || (vs.Spec.Source.VolumeSnapshotContentName != nil && content.Spec.VolumeSnapshotRef.UID == "" &&
			content.Spec.VolumeSnapshotRef.Name == vs.Name && content.Spec.VolumeSnapshotRef.Namespace == vs.Namespace) {
			return content.Spec.DeletionPolicy, nil
		}
		return "", nil
	case !apierrors.IsNotFound(err):
		return "", err
	case vs.Spec.Source.PersistentVolumeClaimName != nil && class != nil:
		return class.DeletionPolicy, nil
	}
	return "", nil
}

// syncReady checks that a ready snapshot's content still exists and still points back at it.
func (c *Controller) syncReady(ctx context.Context, vs *snapv1.VolumeSnapshot) error {
	content, err := c.content(*vs.Status.BoundVolumeSnapshotContentName)
	if apierrors.IsNotFound(err) {
		c.errorStatus(ctx, vs, true, v1.EventTypeWarning, "SnapshotContentMissing", "VolumeSnapshotContent is missing")
		return nil
	}
	if err != nil {
		return err
	}
	if !refersTo(content, vs) {
		c.errorStatus(ctx, vs, true, v1.EventTypeWarning, "SnapshotMisbound", "VolumeSnapshotContent is not bound to the VolumeSnapshot correctly")
		return nil
	}
	// A content whose status changed after the snapshot became ready (restoreSize filled in late) is copied too.
	_, err = c.updateStatus(ctx, vs, content)
	return err
}

// errorStatus records message in status.error (and readyToUse=false when asked) and as an Event with reason.
// The same message already recorded is not written again, so a retry loop does not rewrite the status.
func (c *Controller) errorStatus(ctx context.Context, vs *snapv1.VolumeSnapshot, notReady bool, eventType, reason, message string) {
	fields := func(vs *snapv1.VolumeSnapshot, create bool) (**snapv1.VolumeSnapshotError, **bool) {
		if vs.Status == nil && create {
			vs.Status = &snapv1.VolumeSnapshotStatus{}
		} else if vs.Status == nil {
			return nil, nil
		}
		return &vs.Status.Error, &vs.Status.ReadyToUse
	}
	recordError(ctx, vs, c.getSnapshot(vs), c.snapshotPatch(vs.Namespace), fields, c.cfg.Events, notReady, eventType, reason, message)
}

// recordError is errorStatus for a snapshot or a group snapshot: the Event, then, unless the status already
// holds message, the error (and readyToUse=false when notReady) in one status patch, re-reading with get after a
// conflict. fields points at the status's error and readyToUse, creating the status when asked (nil pointers
// for none). A failed write is only logged: the Event has been recorded.
func recordError[T patch.Object](ctx context.Context, obj T, get func(context.Context) (T, error), patchFn patch.Func[T],
	fields func(obj T, create bool) (**snapv1.VolumeSnapshotError, **bool),
	events record.EventRecorder, notReady bool, eventType, reason, message string) {
	events.Event(obj, eventType, reason, message)
	if last, _ := fields(obj, false); last != nil && *last != nil && (*last).Message != nil && *(*last).Message == message {
		return
	}
	now := metav1.Now()
	_, err := patch.RetryOnConflict(ctx, obj, get, func(ctx context.Context, cur T) (T, error) {
		return patch.Status(ctx, patchFn, cur, func(v T) {
			errp, ready := fields(v, true)
			*errp = &snapv1.VolumeSnapshotError{Time: &now, Message: &message}
			if notReady {
				*ready = new(false)
			}
		})
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Recording the error in the status failed", "object", klog.KObj(obj), "reason", reason)
	}
}

// driverOf is the driver of the snapshot's content or class, "" when neither is known; it labels metrics.
func (c *Controller) driverOf(vs *snapv1.VolumeSnapshot) string {
	if n := vs.Spec.Source.VolumeSnapshotContentName; n != nil {
		if content, err := c.content(*n); err == nil && content.Spec.Driver != "" {
			return content.Spec.Driver
		}
	}
	if n := vs.Spec.VolumeSnapshotClassName; n != nil {
		if class, err := c.classes.Get(*n); err == nil {
			return class.Driver
		}
	}
	return ""
}

// snapshotType labels a snapshot's metrics.
func snapshotType(vs *snapv1.VolumeSnapshot) string {
	if vs.Spec.Source.VolumeSnapshotContentName != nil {
		return opmetrics.PreProvisioned
	}
	return opmetrics.Dynamic
}
