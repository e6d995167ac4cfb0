package handler

import (
	"context"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	grouplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumegroupsnapshot/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/ownwrites"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// Event reasons for group contents, upstream's.
const (
	ReasonGroupCreationFailed = "GroupSnapshotCreationFailed"
	ReasonGroupCheckFailed    = "GroupSnapshotContentCheckandUpdateFailed"
	ReasonGroupDeleteError    = "GroupSnapshotDeleteError"
)

// GroupSnapshotter is the GroupController side: the calls the group handler makes over the driver's socket.
type GroupSnapshotter interface {
	CreateGroup(ctx context.Context, req *csi.CreateVolumeGroupSnapshotRequest) (*csi.VolumeGroupSnapshot, error)
	DeleteGroup(ctx context.Context, req *csi.DeleteVolumeGroupSnapshotRequest) error
	GetGroup(ctx context.Context, req *csi.GetVolumeGroupSnapshotRequest) (*csi.VolumeGroupSnapshot, error)
}

// GroupConfig is what the group handler needs, for VolumeGroupSnapshotContents.
type GroupConfig struct {
	Common
	ClassLister grouplisters.VolumeGroupSnapshotClassLister
	CSI         GroupSnapshotter
}

// GroupHandler syncs VolumeGroupSnapshotContents of one driver, the way Handler syncs contents: the
// being-created annotation before CreateVolumeGroupSnapshot, one status patch with the members' handles,
// DeleteVolumeGroupSnapshot and the finalizer's removal once released. The members' VolumeSnapshotContents
// are the snapshot controller's to create from the status.
type GroupHandler struct {
	cfg     GroupConfig
	tracker *ownwrites.Writes
	// secrets reads Secrets through a Handler with the same client (its credentials method).
	secrets *Handler
}

// NewGroup returns a GroupHandler.
func NewGroup(cfg GroupConfig) *GroupHandler {
	return &GroupHandler{cfg: cfg, tracker: ownwrites.New(), secrets: New(Config{Common: Common{Kube: cfg.Kube}})}
}

func (h *GroupHandler) now() time.Time { return h.cfg.now() }

// Sync brings a group content one step closer to what its spec asks; see Handler.Sync.
func (h *GroupHandler) Sync(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent) (time.Duration, error) {
	if gc.Spec.Driver != h.cfg.Driver {
		return 0, nil
	}
	if h.tracker.Stale(gc) {
		return staleRetry, nil
	}
	if gc.DeletionTimestamp != nil && groupReleased(gc) {
		return 0, h.delete(ctx, gc)
	}
	switch {
	case groupReady(gc):
		_, err := h.removeBeingCreated(ctx, gc)
		return 0, err
	case gc.Spec.Source.GroupSnapshotHandles != nil:
		return h.refresh(ctx, gc)
	case len(gc.Spec.Source.VolumeHandles) > 0:
		return h.create(ctx, gc)
	}
	return 0, nil
}

// Forget drops what the handler remembers about a group content that is gone.
func (h *GroupHandler) Forget(uid types.UID) { h.tracker.Forget(uid) }

// create takes the group snapshot of a dynamic group content, or asks again for one not ready yet.
func (h *GroupHandler) create(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent) (time.Duration, error) {
	req, err := h.createRequest(ctx, gc)
	if err != nil {
		return 0, h.failed(ctx, gc, ReasonGroupCreationFailed, "Failed to create group snapshot", err)
	}
	if gc, err = h.markBeingCreated(ctx, gc); err != nil {
		return 0, err
	}
	klog.FromContext(ctx).V(4).Info("CreateVolumeGroupSnapshot", "name", req.Name, "sourceVolumeIDs", req.SourceVolumeIds)
	group, err := h.cfg.CSI.CreateGroup(ctx, req)
	if err != nil {
		cause := fmt.Errorf("CreateVolumeGroupSnapshot %q of volumes %v: %w", req.Name, req.SourceVolumeIds, err)
		if csiconn.IsFinal(err) {
			removed, rerr := h.removeBeingCreated(ctx, gc)
			if rerr != nil {
				return 0, rerr
			}
			gc = removed
		}
		return 0, h.failed(ctx, gc, ReasonGroupCreationFailed, "Failed to create group snapshot", cause)
	}
	if gc, err = h.writeStatus(ctx, gc, group); err != nil {
		return 0, err
	}
	if _, err := h.removeBeingCreated(ctx, gc); err != nil {
		return 0, err
	}
	klog.FromContext(ctx).V(2).Info("Group snapshot created", "groupSnapshotHandle", group.GetGroupSnapshotId(),
		"members", len(group.GetSnapshots()), "readyToUse", group.GetReadyToUse())
	if !group.GetReadyToUse() {
		return h.cfg.PollInterval, nil
	}
	return 0, nil
}

// createRequest builds the CreateVolumeGroupSnapshot request: the name from the VolumeGroupSnapshot's UID,
// the class's parameters without the reserved keys (plus the group metadata keys with
// --extra-create-metadata), and the secret the snapshot controller recorded on the group content.
func (h *GroupHandler) createRequest(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent) (*csi.CreateVolumeGroupSnapshotRequest, error) {
	uid := string(gc.Spec.VolumeGroupSnapshotRef.UID)
	if uid == "" {
		return nil, fmt.Errorf("volumegroupsnapshotcontent %s: spec.volumeGroupSnapshotRef.uid is empty; the content is not bound to a VolumeGroupSnapshot yet", gc.Name)
	}
	name := createName(h.cfg.NamePrefix, h.cfg.NameUUIDLength, uid)
	if gc.Spec.VolumeGroupSnapshotClassName == nil || *gc.Spec.VolumeGroupSnapshotClassName == "" {
		return nil, fmt.Errorf("volumegroupsnapshotcontent %s: spec.volumeGroupSnapshotClassName is empty; a dynamic group snapshot needs a class", gc.Name)
	}
	class, err := h.cfg.ClassLister.Get(*gc.Spec.VolumeGroupSnapshotClassName)
	if err != nil {
		return nil, fmt.Errorf("volumegroupsnapshotcontent %s: spec.volumeGroupSnapshotClassName: %w", gc.Name, err)
	}
	params, err := reservedStripped("volumegroupsnapshotclass", class.Name, class.Parameters)
	if err != nil {
		return nil, err
	}
	if h.cfg.ExtraCreateMetadata {
		params[snapapi.MetaGroupSnapshotName] = gc.Spec.VolumeGroupSnapshotRef.Name
		params[snapapi.MetaGroupSnapshotNS] = gc.Spec.VolumeGroupSnapshotRef.Namespace
		params[snapapi.MetaGroupContentName] = gc.Name
	}
	secrets, err := h.credentials(ctx, gc)
	if err != nil {
		return nil, err
	}
	return &csi.CreateVolumeGroupSnapshotRequest{Name: name, SourceVolumeIds: gc.Spec.Source.VolumeHandles,
		Parameters: params, Secrets: secrets}, nil
}

// refresh reads a pre-provisioned group with GetVolumeGroupSnapshot and records it in the status.
func (h *GroupHandler) refresh(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent) (time.Duration, error) {
	handles := gc.Spec.Source.GroupSnapshotHandles
	secrets, err := h.credentials(ctx, gc)
	if err != nil {
		return 0, h.failed(ctx, gc, ReasonGroupCheckFailed, "Failed to check and update group snapshot content", err)
	}
	group, err := h.cfg.CSI.GetGroup(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: handles.VolumeGroupSnapshotHandle,
		SnapshotIds: handles.VolumeSnapshotHandles, Secrets: secrets})
	if err != nil {
		return 0, h.failed(ctx, gc, ReasonGroupCheckFailed, "Failed to check and update group snapshot content",
			fmt.Errorf("GetVolumeGroupSnapshot %s: %w", handles.VolumeGroupSnapshotHandle, err))
	}
	if _, err := h.writeStatus(ctx, gc, group); err != nil {
		return 0, err
	}
	if !group.GetReadyToUse() {
		return h.cfg.PollInterval, nil
	}
	return 0, nil
}

// credentials are the group snapshotter secret recorded on the group content by the snapshot controller.
func (h *GroupHandler) credentials(ctx context.Context, gc *groupv1.VolumeGroupSnapshotContent) (map[string]string, error) {
	name, hasName := gc.Annotations[snapapi.AnnGroupDeletionSecretName]
	ns, hasNS := gc.Annotations[snapapi.AnnGroupDeletionSecretNamespace]
	if !hasName || !hasNS {
		return nil, nil
	}
	if name == "" || ns == "" {
		return nil, fmt.Errorf("volumegroupsnapshotcontent %s: annotations %s and %s must both name the secret, got %q and %q",
			gc.Name, snapapi.AnnGroupDeletionSecretName, snapapi.AnnGroupDeletionSecretNamespace, name, ns)
	}
	return h.secrets.credentials(ctx, secretRef(ns, name))
}

func groupReleased(gc *groupv1.VolumeGroupSnapshotContent) bool {
	if gc.Spec.Source.GroupSnapshotHandles != nil && gc.Spec.VolumeGroupSnapshotRef.UID == "" {
		return true
	}
	_, deleting := gc.Annotations[snapapi.AnnGroupBeingDeleted]
	return deleting
}

func groupReady(gc *groupv1.VolumeGroupSnapshotContent) bool {
	return gc.Status != nil && gc.Status.ReadyToUse != nil && *gc.Status.ReadyToUse
}
