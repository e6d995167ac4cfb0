package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/stowage-csi/stowage/shared/patch"
	"github.com/stowage-csi/stowage/snapshotter/internal/controller/opmetrics"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// syncGroupSnapshot converges one VolumeGroupSnapshot, in upstream's order: handle a deletion, validate,
// settle the class, add the bound finalizer, then bind (creating the dynamic group content, and the members
// once the driver has cut them) or check the binding.
func (c *Controller) syncGroupSnapshot(ctx context.Context, gs *groupv1.VolumeGroupSnapshot) error {
	if gs.DeletionTimestamp != nil {
		return c.deleteGroupSnapshot(ctx, gs)
	}
	src := gs.Spec.Source
	if (src.Selector == nil) == (src.VolumeGroupSnapshotContentName == nil) {
		//lint:ignore ST1005 upstream's message, which users and tools match
		err := errors.New("Exactly one of Selector and VolumeGroupSnapshotContentName should be specified")
		c.groupErrorStatus(ctx, gs, true, v1.EventTypeWarning, "GroupSnapshotValidationError", err.Error())
		return fmt.Errorf("volumegroupsnapshot %s/%s spec.source: %w", gs.Namespace, gs.Name, err)
	}
	gs, class, err := c.resolveGroupClass(ctx, gs)
	if err != nil {
		return err
	}
	if !slices.Contains(gs.Finalizers, snapapi.GroupSnapshotBoundFinalizer) {
		gs, err = patch.RetryOnConflict(ctx, gs, c.getGroupSnapshot(gs), func(ctx context.Context, gs *groupv1.VolumeGroupSnapshot) (*groupv1.VolumeGroupSnapshot, error) {
			return patch.AddFinalizer(ctx, c.groupSnapshotPatch(gs.Namespace), gs, snapapi.GroupSnapshotBoundFinalizer)
		})
		if err != nil {
			c.cfg.Events.Event(gs, v1.EventTypeWarning, "GroupSnapshotFinalizerError", fmt.Sprintf("Failed to check and update group snapshot: %s", err))
			return fmt.Errorf("adding %s to volumegroupsnapshot %s/%s: %w", snapapi.GroupSnapshotBoundFinalizer, gs.Namespace, gs.Name, err)
		}
	}
	if !isGroupReady(gs) || !isGroupBound(gs) {
		driver, kind := c.groupDriverOf(gs, class), groupSnapshotType(gs)
		if gs.Status == nil || gs.Status.CreationTime == nil {
			c.cfg.Metrics.Start(opmetrics.CreateGroupSnapshot, gs.UID, driver, kind)
		}
		c.cfg.Metrics.Start(opmetrics.CreateGroupSnapshotAndReady, gs.UID, driver, kind)
		if src.VolumeGroupSnapshotContentName != nil {
			return c.bindPreProvisionedGroup(ctx, gs)
		}
		return c.syncUnreadyDynamicGroup(ctx, gs, class)
	}
	return c.syncReadyGroup(ctx, gs)
}

// resolveGroupClass returns the group snapshot's class, choosing and recording its driver's default group class
// when a dynamic group snapshot names none. A pre-provisioned group snapshot needs no class.
func (c *Controller) resolveGroupClass(ctx context.Context, gs *groupv1.VolumeGroupSnapshot) (*groupv1.VolumeGroupSnapshot, *groupv1.VolumeGroupSnapshotClass, error) {
	if name := gs.Spec.VolumeGroupSnapshotClassName; name != nil {
		class, err := c.groups.classes.Get(*name)
		if err != nil {
			c.groupErrorStatus(ctx, gs, false, v1.EventTypeWarning, "GetGroupSnapshotClassFailed", fmt.Sprintf("Failed to get group snapshot class with error %v", err))
			return gs, nil, fmt.Errorf("volumegroupsnapshot %s/%s spec.volumeGroupSnapshotClassName %q: %w", gs.Namespace, gs.Name, *name, err)
		}
		return gs, class, nil
	}
	if gs.Spec.Source.VolumeGroupSnapshotContentName != nil {
		return gs, nil, nil
	}
	class, err := c.defaultGroupClass(ctx, gs)
	if err != nil {
		c.groupErrorStatus(ctx, gs, false, v1.EventTypeWarning, "SetDefaultGroupSnapshotClassFailed", fmt.Sprintf("Failed to set default group snapshot class with error %v", err))
		return gs, nil, fmt.Errorf("volumegroupsnapshot %s/%s: default group class: %w", gs.Namespace, gs.Name, err)
	}
	updated, err := patch.RetryOnConflict(ctx, gs, c.getGroupSnapshot(gs), func(ctx context.Context, gs *groupv1.VolumeGroupSnapshot) (*groupv1.VolumeGroupSnapshot, error) {
		return patch.Mutate(ctx, c.groupSnapshotPatch(gs.Namespace), gs, func(gs *groupv1.VolumeGroupSnapshot) {
			gs.Spec.VolumeGroupSnapshotClassName = &class.Name
		})
	})
	if err != nil {
		return gs, nil, fmt.Errorf("volumegroupsnapshot %s/%s: recording default group class %s: %w", gs.Namespace, gs.Name, class.Name, err)
	}
	return updated, class, nil
}

// defaultGroupClass finds the one group class marked default for the driver of the selected volumes.
func (c *Controller) defaultGroupClass(ctx context.Context, gs *groupv1.VolumeGroupSnapshot) (*groupv1.VolumeGroupSnapshotClass, error) {
	pvs, err := c.groupVolumes(ctx, gs)
	if err != nil {
		return nil, err
	}
	if pvs[0].Spec.CSI == nil {
		return nil, fmt.Errorf("snapshotting non-CSI volumes is not supported, group snapshot:%s/%s", gs.Namespace, gs.Name)
	}
	classes, err := c.groups.classes.List(everything)
	if err != nil {
		return nil, err
	}
	var defaults []*groupv1.VolumeGroupSnapshotClass
	for _, class := range classes {
		if class.Annotations[snapapi.AnnGroupDefaultClass] == "true" && class.Driver == pvs[0].Spec.CSI.Driver {
			defaults = append(defaults, class)
		}
	}
	switch len(defaults) {
	case 0:
		return nil, errors.New("cannot find default group snapshot class")
	case 1:
		return defaults[0], nil
	default:
		return nil, fmt.Errorf("%d default snapshot classes were found", len(defaults))
	}
}

// syncUnreadyDynamicGroup creates the group content if it does not exist yet, creates the members once the
// content's status lists them, and copies the content's status.
func (c *Controller) syncUnreadyDynamicGroup(ctx context.Context, gs *groupv1.VolumeGroupSnapshot, class *groupv1.VolumeGroupSnapshotClass) error {
	gc, err := c.groupContent(dynamicGroupContentName(gs))
	switch {
	case err == nil:
		if gc.Spec.Source.GroupSnapshotHandles != nil {
			key := gs.Namespace + "/" + gs.Name
			c.groupErrorStatus(ctx, gs, true, v1.EventTypeWarning, "GroupSnapshotHandleSet", fmt.Sprintf("GroupSnapshot handle should not be set in group snapshot content %s for dynamic provisioning", key))
			return fmt.Errorf("volumegroupsnapshotcontent %s spec.source.groupSnapshotHandles must not be set for dynamic provisioning of %s", gc.Name, key)
		}
		if !groupRefersTo(gc, gs) {
			msg := fmt.Sprintf("VolumeGroupSnapshotContent [%s] is bound to a different group snapshot", gc.Name)
			c.groupErrorStatus(ctx, gs, true, v1.EventTypeWarning, "GroupSnapshotContentMisbound", msg)
			return errors.New(msg)
		}
		if err := c.createMembers(ctx, gs, gc); err != nil {
			return err
		}
	case !apierrors.IsNotFound(err):
		return err
	default:
		if gc, err = c.createGroupContent(ctx, gs, class); err != nil {
			c.groupErrorStatus(ctx, gs, true, v1.EventTypeWarning, "GroupSnapshotContentCreationFailed", fmt.Sprintf("failed to create group snapshot content with error %v", err))
			return err
		}
	}
	if _, err := c.updateGroupStatus(ctx, gs, gc); err != nil {
		c.groupErrorStatus(ctx, gs, false, v1.EventTypeWarning, "GroupSnapshotStatusUpdateFailed", fmt.Sprintf("GroupSnapshot status update failed, %v", err))
		return err
	}
	return nil
}

// bindPreProvisionedGroup binds gs to the group content it names, which must be pre-provisioned (group
// snapshot handles) and point back at gs by name; its volumeGroupSnapshotRef.uid and class are filled in here.
// As upstream, no member VolumeSnapshots are made for a pre-provisioned group.
func (c *Controller) bindPreProvisionedGroup(ctx context.Context, gs *groupv1.VolumeGroupSnapshot) error {
	name := *gs.Spec.Source.VolumeGroupSnapshotContentName
	if name == "" {
		return fmt.Errorf("volumegroupsnapshot %s/%s spec.source.volumeGroupSnapshotContentName is empty", gs.Namespace, gs.Name)
	}
	gc, err := c.groupContent(name)
	if apierrors.IsNotFound(err) {
		c.groupErrorStatus(ctx, gs, true, v1.EventTypeWarning, "GroupSnapshotContentMissing", "VolumeGroupSnapshotContent is missing")
		return fmt.Errorf("volumegroupsnapshot %s/%s requests a non-existing group content %s", gs.Namespace, gs.Name, name)
	}
	if err != nil {
		return err
	}
	if gc.Spec.Source.GroupSnapshotHandles == nil {
		c.groupErrorStatus(ctx, gs, true, v1.EventTypeWarning, "GroupSnapshotContentMismatch", "VolumeGroupSnapshotContent is dynamically provisioned while expecting a pre-provisioned one")
		return fmt.Errorf("volumegroupsnapshot %s/%s expects a pre-provisioned VolumeGroupSnapshotContent %s but gets a dynamically provisioned one", gs.Namespace, gs.Name, name)
	}
	ref := gc.Spec.VolumeGroupSnapshotRef
	if ref.Name != gs.Name || ref.Namespace != gs.Namespace || (ref.UID != "" && ref.UID != gs.UID) {
		msg := fmt.Sprintf("VolumeGroupSnapshotContent [%s] is bound to a different group snapshot", name)
		c.groupErrorStatus(ctx, gs, true, v1.EventTypeWarning, "GroupSnapshotContentMisbound", msg)
		return errors.New(msg)
	}
	if ref.UID == "" || (gc.Spec.VolumeGroupSnapshotClassName == nil && gs.Spec.VolumeGroupSnapshotClassName != nil) {
		gc, err = patch.RetryOnConflict(ctx, gc, c.getGroupContent(gc), func(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent) (*groupv1.VolumeGroupSnapshotContent, error) {
			return patch.Mutate(ctx, c.groupContentPatch(), gc, func(gc *groupv1.VolumeGroupSnapshotContent) {
				gc.Spec.VolumeGroupSnapshotRef.UID = gs.UID
				if gs.Spec.VolumeGroupSnapshotClassName != nil {
					gc.Spec.VolumeGroupSnapshotClassName = gs.Spec.VolumeGroupSnapshotClassName
				}
			})
		})
		if err != nil {
			c.groupErrorStatus(ctx, gs, true, v1.EventTypeWarning, "GroupSnapshotBindFailed", fmt.Sprintf("GroupSnapshot failed to bind VolumeGroupSnapshotContent, %v", err))
			return fmt.Errorf("volumegroupsnapshot %s/%s: binding VolumeGroupSnapshotContent %s: %w", gs.Namespace, gs.Name, name, err)
		}
	}
	if _, err := c.updateGroupStatus(ctx, gs, gc); err != nil {
		c.groupErrorStatus(ctx, gs, false, v1.EventTypeWarning, "GroupSnapshotStatusUpdateFailed", fmt.Sprintf("GroupSnapshot status update failed, %v", err))
		return err
	}
	return nil
}

// syncReadyGroup checks that a ready group snapshot's content still exists and still points back at it.
func (c *Controller) syncReadyGroup(ctx context.Context, gs *groupv1.VolumeGroupSnapshot) error {
	gc, err := c.groupContent(*gs.Status.BoundVolumeGroupSnapshotContentName)
	if apierrors.IsNotFound(err) {
		c.groupErrorStatus(ctx, gs, true, v1.EventTypeWarning, "GroupSnapshotContentMissing", "VolumeGroupSnapshotContent is missing")
		return nil
	}
	if err != nil {
		return err
	}
	if !groupRefersTo(gc, gs) {
		c.groupErrorStatus(ctx, gs, true, v1.EventTypeWarning, "GroupSnapshotMisbound", "VolumeGroupSnapshotContent is not bound to the VolumeGroupSnapshot correctly")
	}
	return nil
}

// groupErrorStatus is errorStatus for group snapshots.
func (c *Controller) groupErrorStatus(ctx context.Context, gs *groupv1.VolumeGroupSnapshot, notReady bool, eventType, reason, message string) {
	fields := func(gs *groupv1.VolumeGroupSnapshot, create bool) (**snapv1.VolumeSnapshotError, **bool) {
		if gs.Status == nil && create {
			gs.Status = &groupv1.VolumeGroupSnapshotStatus{}
		} else if gs.Status == nil {
			return nil, nil
		}
		return &gs.Status.Error, &gs.Status.ReadyToUse
	}
	recordError(ctx, gs, c.getGroupSnapshot(gs), c.groupSnapshotPatch(gs.Namespace), fields, c.cfg.Events, notReady, eventType, reason, message)
}

// updateGroupStatus copies the group content's status onto the group snapshot with one status patch, by
// upstream's rules: the bound name and creation time are set once, readyToUse and the error follow the content.
func (c *Controller) updateGroupStatus(ctx context.Context, gs *groupv1.VolumeGroupSnapshot, gc *groupv1.VolumeGroupSnapshotContent) (*groupv1.VolumeGroupSnapshot, error) {
	created := func(gs *groupv1.VolumeGroupSnapshot) bool { return gs.Status != nil && gs.Status.CreationTime != nil }
	return writeStatus(ctx, c, gs, c.getGroupSnapshot(gs), c.groupSnapshotPatch(gs.Namespace),
		func(gs *groupv1.VolumeGroupSnapshot) { gs.Status = mergeGroupStatus(gs.Status, gc) }, "volumegroupsnapshot", gc.Spec.Driver,
		statusStep[*groupv1.VolumeGroupSnapshot]{created, opmetrics.CreateGroupSnapshot, "GroupSnapshotCreated", "GroupSnapshot %s was successfully created by the CSI driver."},
		statusStep[*groupv1.VolumeGroupSnapshot]{isGroupReady, opmetrics.CreateGroupSnapshotAndReady, "GroupSnapshotReady", "GroupSnapshot %s is ready to use."})
}

// mergeGroupStatus returns the group snapshot status old updated from gc's status.
func mergeGroupStatus(old *groupv1.VolumeGroupSnapshotStatus, gc *groupv1.VolumeGroupSnapshotContent) *groupv1.VolumeGroupSnapshotStatus {
	cs := gc.Status
	if cs == nil {
		cs = &groupv1.VolumeGroupSnapshotContentStatus{}
	}
	st := &groupv1.VolumeGroupSnapshotStatus{}
	if old != nil {
		st = old.DeepCopy()
	}
	if st.BoundVolumeGroupSnapshotContentName == nil {
		st.BoundVolumeGroupSnapshotContentName = &gc.Name
	}
	if st.CreationTime == nil && cs.CreationTime != nil {
		st.CreationTime = cs.CreationTime.DeepCopy()
	}
	ready := cs.ReadyToUse != nil && *cs.ReadyToUse
	if st.ReadyToUse == nil || *st.ReadyToUse != ready {
		st.ReadyToUse = &ready
	}
	st.Error = nil
	if cs.Error != nil {
		st.Error = cs.Error.DeepCopy()
	}
	return st
}

// groupDriverOf is the driver of the group snapshot's content (pre-provisioned) or class, "" when neither is
// known; it labels metrics. class is the group's class when the caller has it already.
func (c *Controller) groupDriverOf(gs *groupv1.VolumeGroupSnapshot, class *groupv1.VolumeGroupSnapshotClass) string {
	if n := gs.Spec.Source.VolumeGroupSnapshotContentName; n != nil {
		if gc, err := c.groupContent(*n); err == nil && gc.Spec.Driver != "" {
			return gc.Spec.Driver
		}
	}
	if class == nil && gs.Spec.VolumeGroupSnapshotClassName != nil {
		class, _ = c.groups.classes.Get(*gs.Spec.VolumeGroupSnapshotClassName)
	}
	if class != nil {
		return class.Driver
	}
	return ""
}

// groupSnapshotType labels a group snapshot's metrics.
func groupSnapshotType(gs *groupv1.VolumeGroupSnapshot) string {
	if gs.Spec.Source.VolumeGroupSnapshotContentName != nil {
		return opmetrics.PreProvisioned
	}
	return opmetrics.Dynamic
}
