package driver

import (
	"context"
	"errors"
	"math"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/cloud"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/params"
)

// CreateSnapshot implements csi.ControllerServer. Snapshots have no ClientToken, so a repeated request is
// found by its CSIVolumeSnapshotName tag first.
func (d *Driver) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	name, src := req.GetName(), req.GetSourceVolumeId()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	if src == "" {
		return nil, status.Error(codes.InvalidArgument, "source_volume_id is required")
	}
	sp, err := params.ParseSnapshot(req.GetParameters())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "parameters: %v", err)
	}
	data := params.SnapshotTemplateData{VolumeSnapshotName: sp.VolumeSnapshotName,
		VolumeSnapshotNamespace: sp.VolumeSnapshotNamespace, VolumeSnapshotContentName: sp.VolumeSnapshotContentName}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("snapshot", name))
	// --warn-on-invalid-tag applies to snapshot classes as to storage classes, as upstream.
	classTags, err := params.RenderTagsWarnOnly(ctx, sp.TagSpecs, data, d.opts.WarnOnInvalidTag)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "parameters: %v", err)
	}
	release, ok := d.inFlight.Insert("snapshot/" + name)
	if !ok {
		return nil, aborted("snapshot " + name)
	}
	defer release()

	existing, err := d.cloud.GetSnapshotByName(ctx, name)
	switch {
	case err == nil:
		if existing.SourceVolumeID != src {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %q exists for volume %s, not %s", name, existing.SourceVolumeID, src)
		}
		return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(existing)}, nil
	case !errors.Is(err, cloud.ErrNotFound):
		return nil, cloudError(err, "look up snapshot %q", name)
	}
	if !validVolumeID(src) {
		return nil, status.Errorf(codes.NotFound, "source volume %q does not exist", src)
	}
	if len(sp.FSRZones) > 0 {
		zones, err := d.cloud.AvailabilityZones(ctx)
		if err != nil {
			return nil, cloudError(err, "list availability zones")
		}
		for _, z := range sp.FSRZones {
			if !contains(zones, z) {
				return nil, status.Errorf(codes.InvalidArgument, "parameters: fastSnapshotRestoreAvailabilityZones: %q is not a zone of this region", z)
			}
		}
	}
	tags := params.SnapshotTags(name, params.TagFlags{ClusterID: d.opts.KubernetesClusterID, Extra: d.opts.ExtraTags}, classTags)
	opts := cloud.SnapshotOptions{Tags: tags, OutpostARN: sp.OutpostARN, FSRZones: sp.FSRZones}
	if sp.LockMode != "" {
		opts.Lock = &cloud.LockOptions{Mode: sp.LockMode, DurationDays: sp.LockDurationDays,
			ExpirationDate: sp.LockExpirationDate, CoolOffHours: sp.LockCoolOffHours}
	}
	snap, err := d.cloud.CreateSnapshot(ctx, name, src, opts)
	if err != nil {
		return nil, cloudError(err, "create snapshot %q of %s", name, src)
	}
	return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(snap)}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func csiSnapshot(s *cloud.Snapshot) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId:     s.SnapshotID,
		SourceVolumeId: s.SourceVolumeID,
		SizeBytes:      int64(s.SizeGiB) * gib,
		CreationTime:   timestamppb.New(s.CreationTime),
		ReadyToUse:     s.ReadyToUse,
	}
}

// DeleteSnapshot implements csi.ControllerServer.
func (d *Driver) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	id := req.GetSnapshotId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot_id is required")
	}
	if !validSnapshotID(id) {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	release, ok := d.inFlight.Insert("delete-snapshot/" + id)
	if !ok {
		return nil, aborted("snapshot " + id)
	}
	defer release()
	if err := d.cloud.DeleteSnapshot(ctx, id); err != nil {
		return nil, cloudError(err, "delete snapshot %s", id)
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

// ListSnapshots implements csi.ControllerServer.
func (d *Driver) ListSnapshots(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	if req.GetMaxEntries() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "max_entries %d must not be negative", req.GetMaxEntries())
	}
	if id := req.GetSnapshotId(); id != "" {
		if !validSnapshotID(id) {
			return &csi.ListSnapshotsResponse{}, nil
		}
		snap, err := d.cloud.GetSnapshotByID(ctx, id)
		if err != nil {
			if errors.Is(err, cloud.ErrNotFound) {
				return &csi.ListSnapshotsResponse{}, nil
			}
			return nil, cloudError(err, "snapshot %s", id)
		}
		if src := req.GetSourceVolumeId(); src != "" && src != snap.SourceVolumeID {
			return &csi.ListSnapshotsResponse{}, nil
		}
		return &csi.ListSnapshotsResponse{Entries: []*csi.ListSnapshotsResponse_Entry{{Snapshot: csiSnapshot(snap)}}}, nil
	}
	src := req.GetSourceVolumeId()
	if src != "" && !validVolumeID(src) {
		return &csi.ListSnapshotsResponse{}, nil
	}
	maxEntries := int(req.GetMaxEntries())
	if maxEntries > math.MaxInt32 {
		maxEntries = math.MaxInt32
	}
	snaps, next, err := d.cloud.ListSnapshots(ctx, src, maxEntries, req.GetStartingToken())
	if err != nil {
		if errors.Is(err, cloud.ErrInvalidArgument) {
			return nil, status.Errorf(codes.Aborted, "starting_token %q is not valid: %v", req.GetStartingToken(), err)
		}
		return nil, cloudError(err, "list snapshots")
	}
	resp := &csi.ListSnapshotsResponse{NextToken: next}
	for _, s := range snaps {
		resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: csiSnapshot(s)})
	}
	return resp, nil
}

// GetSnapshot implements csi.ControllerServer (GET_SNAPSHOT): one snapshot by ID, NotFound if it is gone.
func (d *Driver) GetSnapshot(ctx context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	id := req.GetSnapshotId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot_id is required")
	}
	if !validSnapshotID(id) {
		return nil, status.Errorf(codes.NotFound, "snapshot %q does not exist", id)
	}
	snap, err := d.cloud.GetSnapshotByID(ctx, id)
	if err != nil {
		return nil, cloudError(err, "snapshot %s", id)
	}
	return &csi.GetSnapshotResponse{Snapshot: csiSnapshot(snap)}, nil
}
