package controller

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/patch"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// byGroup indexes member VolumeSnapshots by the "namespace/name" of the VolumeGroupSnapshot that owns them.
// The owner reference is what marks a member, as upstream's controller has it: upstream writes no label on
// its members, so a member it created (before a swap to this controller) is found the same way as ours.
const byGroup = "group"

// groupOwner is the name of the VolumeGroupSnapshot owning vs, "" when vs is no group's member.
func groupOwner(vs *snapv1.VolumeSnapshot) string {
	for _, o := range vs.OwnerReferences {
		if o.Kind == "VolumeGroupSnapshot" && o.APIVersion == groupv1.SchemeGroupVersion.String() {
			return o.Name
		}
	}
	return ""
}

// groupKeys is the byGroup index function.
func groupKeys(obj any) ([]string, error) {
	vs, ok := obj.(*snapv1.VolumeSnapshot)
	if !ok {
		return nil, nil
	}
	if name := groupOwner(vs); name != "" {
		return []string{vs.Namespace + "/" + name}, nil
	}
	return nil, nil
}

// memberNames are upstream's names for the member snapshot and content of volumeHandle in group gs.
func memberNames(gs *groupv1.VolumeGroupSnapshot, volumeHandle string) (snapshot, content string) {
	sum := sha256.Sum256([]byte(string(gs.UID) + volumeHandle))
	return fmt.Sprintf("snapshot-%x", sum), fmt.Sprintf("snapcontent-%x", sum)
}

// isGroupMember reports whether vs is a member of a group snapshot, made by this controller or upstream's.
func isGroupMember(vs *snapv1.VolumeSnapshot) bool {
	return groupOwner(vs) != ""
}

// groupMembers lists the member VolumeSnapshots of gs from the cache, by name, so that what is done to them
// happens in the same order on every sync (the cache's order is a map's).
func (c *Controller) groupMembers(gs *groupv1.VolumeGroupSnapshot) ([]*snapv1.VolumeSnapshot, error) {
	objs, err := c.byClaim.ByIndex(byGroup, gs.Namespace+"/"+gs.Name)
	if err != nil {
		return nil, err
	}
	members := make([]*snapv1.VolumeSnapshot, 0, len(objs))
	for _, o := range objs {
		if vs, ok := o.(*snapv1.VolumeSnapshot); ok {
			members = append(members, vs)
		}
	}
	slices.SortFunc(members, func(a, b *snapv1.VolumeSnapshot) int { return strings.Compare(a.Name, b.Name) })
	return members, nil
}

// createMembers makes, once the group content's status lists the members' snapshot handles, one
// VolumeSnapshot and one VolumeSnapshotContent per member, bound to each other, as upstream does. The
// snapshot is created first, so its content is created already bound (with the snapshot's UID) and already
// carrying its finalizer; the content's status (the member's handle, time, size, readiness) and then the
// snapshot's status follow, so every member costs four writes (upstream's five). Each step is skipped when
// already done, so an interrupted sync resumes where it stopped.
func (c *Controller) createMembers(ctx context.Context, gs *groupv1.VolumeGroupSnapshot, gc *groupv1.VolumeGroupSnapshotContent) error {
	st := gc.Status
	if st == nil || len(st.VolumeSnapshotInfoList) == 0 || st.VolumeGroupSnapshotHandle == nil {
		return nil // the driver has not cut the group yet
	}
	pvs := c.volumesByHandle(ctx, gs)
	for _, info := range st.VolumeSnapshotInfoList {
		if err := c.createMember(ctx, gs, gc, info, pvs[info.VolumeHandle]); err != nil {
			return fmt.Errorf("volumegroupsnapshot %s/%s member of volume %s: %w", gs.Namespace, gs.Name, info.VolumeHandle, err)
		}
	}
	return nil
}

func (c *Controller) createMember(ctx context.Context, gs *groupv1.VolumeGroupSnapshot, gc *groupv1.VolumeGroupSnapshotContent,
	info groupv1.VolumeSnapshotInfo, pv *v1.PersistentVolume) error {
	vsName, contentName := memberNames(gs, info.VolumeHandle)
	vs, err := c.memberSnapshot(ctx, gs, gc, vsName, pv)
	if err != nil {
		return err
	}
	content, err := c.memberContent(ctx, gs, gc, vs, contentName, info, pv)
	if err != nil {
		return err
	}
	if content.Status == nil || content.Status.SnapshotHandle == nil {
		content, err = patch.RetryOnConflict(ctx, content, c.getContent(content), func(ctx context.Context, content *snapv1.VolumeSnapshotContent) (*snapv1.VolumeSnapshotContent, error) {
			return patch.Status(ctx, c.contentPatch(), content, func(content *snapv1.VolumeSnapshotContent) {
				handle, groupHandle := info.SnapshotHandle, *gc.Status.VolumeGroupSnapshotHandle
				content.Status = &snapv1.VolumeSnapshotContentStatus{
					SnapshotHandle: &handle, VolumeGroupSnapshotHandle: &groupHandle,
					CreationTime: info.CreationTime, RestoreSize: info.RestoreSize, ReadyToUse: info.ReadyToUse,
				}
			})
		})
		if err != nil {
			return fmt.Errorf("volumesnapshotcontent %s status: %w", contentName, err)
		}
	}
	_, err = c.updateMemberStatus(ctx, vs, content, gs.Name)
	return err
}

// memberSnapshot returns the member VolumeSnapshot vsName, creating it if needed: owned by the group (which
// marks it a member, and lets the garbage collector remove it with the group), with the in-group finalizer
// and, when the group's content is deleted with it, the bound finalizer.
func (c *Controller) memberSnapshot(ctx context.Context, gs *groupv1.VolumeGroupSnapshot, gc *groupv1.VolumeGroupSnapshotContent, name string, pv *v1.PersistentVolume) (*snapv1.VolumeSnapshot, error) {
	if vs, err := c.snapshots.VolumeSnapshots(gs.Namespace).Get(name); err == nil {
		return c.snapshotsWritten.Of(gs.Namespace+"/"+name, vs), nil
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	finalizers := []string{snapapi.SnapshotInGroupFinalizer}
	if gc.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete {
		finalizers = append(finalizers, snapapi.SnapshotBoundFinalizer)
	}
	claim := ""
	if pv != nil && pv.Spec.ClaimRef != nil {
		claim = pv.Spec.ClaimRef.Name
	}
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: gs.Namespace,
			Finalizers: finalizers,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: groupv1.SchemeGroupVersion.String(), Kind: "VolumeGroupSnapshot", Name: gs.Name, UID: gs.UID,
			}},
		},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim}},
	}
	created, err := c.cfg.Snap.SnapshotV1().VolumeSnapshots(gs.Namespace).Create(ctx, vs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Created by an earlier sync the cache has not seen yet; its UID is needed for the content's reference.
		return c.cfg.Snap.SnapshotV1().VolumeSnapshots(gs.Namespace).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("creating VolumeSnapshot %s/%s: %w", gs.Namespace, name, err)
	}
	c.snapshotsWritten.Wrote(gs.Namespace+"/"+name, created)
	klog.FromContext(ctx).V(2).Info("Created member VolumeSnapshot", "volumesnapshot", name)
	return created, nil
}

// memberContent returns the member content name, creating it if needed, bound to vs, with the group's
// handle annotation (so csi-snapshotter does not call CreateSnapshot for it), the group's driver and policy.
func (c *Controller) memberContent(ctx context.Context, gs *groupv1.VolumeGroupSnapshot, gc *groupv1.VolumeGroupSnapshotContent,
	vs *snapv1.VolumeSnapshot, name string, info groupv1.VolumeSnapshotInfo, pv *v1.PersistentVolume) (*snapv1.VolumeSnapshotContent, error) {
	if content, err := c.content(name); err == nil {
		return content, nil
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	volumeHandle := info.VolumeHandle
	content := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{snapapi.AnnGroupHandle: *gc.Status.VolumeGroupSnapshotHandle},
			Finalizers:  []string{snapapi.ContentBoundFinalizer},
		},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: v1.ObjectReference{
				Kind: "VolumeSnapshot", APIVersion: snapv1.SchemeGroupVersion.String(),
				Namespace: vs.Namespace, Name: vs.Name, UID: vs.UID,
			},
			DeletionPolicy: gc.Spec.DeletionPolicy,
			Driver:         gc.Spec.Driver,
			Source:         snapv1.VolumeSnapshotContentSource{VolumeHandle: &volumeHandle},
		},
	}
	if pv != nil && c.cfg.PreventVolumeModeConversion {
		content.Spec.SourceVolumeMode = pv.Spec.VolumeMode
	}
	if class := gs.Spec.VolumeGroupSnapshotClassName; class != nil {
		if gclass, err := c.groups.classes.Get(*class); err == nil {
			secret, err := groupSecretRef(gclass.Parameters, gc.Name, gs)
			if err != nil {
				return nil, fmt.Errorf("volumegroupsnapshotclass %s parameters: %w", gclass.Name, err)
			}
			if secret != nil {
				content.Annotations[snapapi.AnnDeletionSecretName] = secret.Name
				content.Annotations[snapapi.AnnDeletionSecretNamespace] = secret.Namespace
			}
		}
	}
	created, err := c.cfg.Snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, content, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return c.cfg.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("creating VolumeSnapshotContent %s: %w", name, err)
	}
	c.contentsWritten.Wrote(name, created)
	return created, nil
}

// volumesByHandle maps the volume handles of the group's claims to their volumes. A claim that no longer
// resolves leaves its member without a claim name, as upstream's lookup by handle does.
func (c *Controller) volumesByHandle(ctx context.Context, gs *groupv1.VolumeGroupSnapshot) map[string]*v1.PersistentVolume {
	out := map[string]*v1.PersistentVolume{}
	pvs, err := c.groupVolumes(ctx, gs)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Member snapshots will name no claim", "err", err)
		return out
	}
	for _, pv := range pvs {
		if pv.Spec.CSI != nil {
			out[pv.Spec.CSI.VolumeHandle] = pv
		}
	}
	return out
}

// syncMember keeps a member VolumeSnapshot's status in step with its content; members have no class and no
// source claim finalizer, and their content was created with them.
func (c *Controller) syncMember(ctx context.Context, vs *snapv1.VolumeSnapshot) error {
	if !isBound(vs) {
		return nil // the group's sync binds it
	}
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
	_, err = c.updateMemberStatus(ctx, vs, content, groupOwner(vs))
	return err
}

// updateMemberStatus is updateStatus for a member, which also records the group's name.
func (c *Controller) updateMemberStatus(ctx context.Context, vs *snapv1.VolumeSnapshot, content *snapv1.VolumeSnapshotContent, group string) (*snapv1.VolumeSnapshot, error) {
	before := vs
	updated, err := patch.RetryOnConflict(ctx, vs, c.getSnapshot(vs), func(ctx context.Context, vs *snapv1.VolumeSnapshot) (*snapv1.VolumeSnapshot, error) {
		before = vs
		return patch.Status(ctx, c.snapshotPatch(vs.Namespace), vs, func(vs *snapv1.VolumeSnapshot) {
			vs.Status = mergeStatus(vs.Status, content)
			if vs.Status.VolumeGroupSnapshotName == nil && group != "" {
				vs.Status.VolumeGroupSnapshotName = &group
			}
		})
	})
	if err != nil {
		return vs, fmt.Errorf("volumesnapshot %s/%s status: %w", vs.Namespace, vs.Name, err)
	}
	key := vs.Namespace + "/" + vs.Name
	if !isCreated(before) && isCreated(updated) {
		c.cfg.Events.Event(updated, v1.EventTypeNormal, "SnapshotCreated", fmt.Sprintf("Snapshot %s was successfully created by the CSI driver.", key))
	}
	if !isReady(before) && isReady(updated) {
		c.cfg.Events.Event(updated, v1.EventTypeNormal, "SnapshotReady", fmt.Sprintf("Snapshot %s is ready to use.", key))
	}
	return updated, nil
}

// memberDeletionBlocked reports whether a member's deletion must wait: upstream refuses to delete a member
// on its own while its group snapshot exists and is not being deleted.
func (c *Controller) memberDeletionBlocked(vs *snapv1.VolumeSnapshot) bool {
	name := groupOwner(vs)
	if name == "" || c.groups == nil {
		return false
	}
	gs, err := c.groups.snapshots.VolumeGroupSnapshots(vs.Namespace).Get(name)
	if err != nil || gs.DeletionTimestamp != nil {
		return false
	}
	return slices.ContainsFunc(vs.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == gs.UID })
}
