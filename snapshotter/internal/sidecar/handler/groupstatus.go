package handler

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/shared/ownwrites"
	"github.com/stowage-csi/stowage/shared/patch"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

func (h *GroupHandler) getter(name string) func(context.Context) (*groupv1.VolumeGroupSnapshotContent, error) {
	return func(ctx context.Context) (*groupv1.VolumeGroupSnapshotContent, error) {
		return h.cfg.Client.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(ctx, name, metav1.GetOptions{})
	}
}

// writeStatus merges what the driver said about the group into the status as upstream does (set what is
// unset, readyToUse always, the error cleared once ready), in one status patch preconditioned on the version
// in hand, re-reading after a conflict.
func (h *GroupHandler) writeStatus(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent, group *csi.VolumeGroupSnapshot) (*groupv1.VolumeGroupSnapshotContent, error) {
	contents := h.cfg.Client.GroupsnapshotV1().VolumeGroupSnapshotContents()
	created := metav1.NewTime(h.now())
	if group.GetCreationTime() != nil {
		created = metav1.NewTime(group.GetCreationTime().AsTime())
	}
	members := make([]groupv1.VolumeSnapshotInfo, 0, len(group.GetSnapshots()))
	for _, s := range group.GetSnapshots() {
		o := snapshotStatus(s, h.now())
		info := groupv1.VolumeSnapshotInfo{VolumeHandle: s.GetSourceVolumeId(), SnapshotHandle: o.handle,
			CreationTime: &o.creationTime, ReadyToUse: &o.ready}
		if o.size > 0 {
			info.RestoreSize = &o.size
		}
		members = append(members, info)
	}
	out, err := ownwrites.Retry(ctx, h.tracker, gc, h.getter(gc.Name), func(ctx context.Context, cur *groupv1.VolumeGroupSnapshotContent) (*groupv1.VolumeGroupSnapshotContent, error) {
		return patch.Status(ctx, contents.Patch, cur, func(v *groupv1.VolumeGroupSnapshotContent) {
			if v.Status == nil {
				v.Status = &groupv1.VolumeGroupSnapshotContentStatus{}
			}
			s := v.Status
			if s.VolumeGroupSnapshotHandle == nil {
				id := group.GetGroupSnapshotId()
				s.VolumeGroupSnapshotHandle = &id
			}
			ready := group.GetReadyToUse()
			s.ReadyToUse = &ready
			if ready {
				s.Error = nil
			}
			if s.CreationTime == nil {
				s.CreationTime = &created
			}
			if len(s.VolumeSnapshotInfoList) == 0 {
				s.VolumeSnapshotInfoList = members
			}
		})
	})
	if err != nil {
		return gc, fmt.Errorf("volumegroupsnapshotcontent %s: writing status (groupSnapshotHandle %s): %w", gc.Name, group.GetGroupSnapshotId(), err)
	}
	return out, nil
}

// failed records cause in status.error with a Warning Event, unless the same message is there; see
// Handler.failed.
func (h *GroupHandler) failed(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent, reason, what string, cause error) error {
	fields := func(v *groupv1.VolumeGroupSnapshotContent, create bool) (**snapv1.VolumeSnapshotError, **bool) {
		if v.Status == nil && create {
			v.Status = &groupv1.VolumeGroupSnapshotContentStatus{}
		} else if v.Status == nil {
			return nil, nil
		}
		return &v.Status.Error, &v.Status.ReadyToUse
	}
	return failStatus(ctx, h.tracker, h.cfg.Events, h.cfg.Client.GroupsnapshotV1().VolumeGroupSnapshotContents().Patch, gc, fields, h.now(), reason, what, cause)
}

// markBeingCreated sets the group being-created annotation with one preconditioned patch.
func (h *GroupHandler) markBeingCreated(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent) (*groupv1.VolumeGroupSnapshotContent, error) {
	contents := h.cfg.Client.GroupsnapshotV1().VolumeGroupSnapshotContents()
	return setAnnotation(ctx, h.tracker, gc, h.getter(gc.Name), contents.Patch, "volumegroupsnapshotcontent", snapapi.AnnGroupBeingCreated)
}

// removeBeingCreated drops the group being-created annotation, which only csi-snapshotter sets, with a JSON
// patch that tests its value (see Handler.removeBeingCreated).
func (h *GroupHandler) removeBeingCreated(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent) (*groupv1.VolumeGroupSnapshotContent, error) {
	return removeOwnedAnnotation(ctx, h.tracker, gc, h.cfg.Client.GroupsnapshotV1().VolumeGroupSnapshotContents().Patch, "volumegroupsnapshotcontent", snapapi.AnnGroupBeingCreated)
}
