package driver

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/cloud"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/params"
)

// modifyRequest is what ControllerExpandVolume and ControllerModifyVolume ask of one volume; requests within
// the window are merged into one.
type modifyRequest struct {
	sizeBytes  int64
	volumeType string
	iops       int32
	iopsPerGB  int32
	throughput int32
	tagsAdd    map[string]string
	tagsDelete []string
}

type conflictError struct{ field, a, b string }

func (e conflictError) Error() string {
	return fmt.Sprintf("conflicts with a concurrent request for the same volume: %s %s vs %s; retry after it completes", e.field, e.a, e.b)
}

func mergeModify(p, n modifyRequest) (modifyRequest, error) {
	check := func(field string, a, b any, zero bool) error {
		if !zero && a != b {
			return conflictError{field, fmt.Sprint(a), fmt.Sprint(b)}
		}
		return nil
	}
	if n.sizeBytes > 0 {
		if err := check("size", p.sizeBytes, n.sizeBytes, p.sizeBytes == 0); err != nil {
			return p, err
		}
		p.sizeBytes = n.sizeBytes
	}
	if n.volumeType != "" {
		if err := check("type", p.volumeType, n.volumeType, p.volumeType == ""); err != nil {
			return p, err
		}
		p.volumeType = n.volumeType
	}
	if n.iops > 0 {
		if err := check("iops", p.iops, n.iops, p.iops == 0); err != nil {
			return p, err
		}
		p.iops = n.iops
	}
	if n.iopsPerGB > 0 {
		if err := check("iopspergb", p.iopsPerGB, n.iopsPerGB, p.iopsPerGB == 0); err != nil {
			return p, err
		}
		p.iopsPerGB = n.iopsPerGB
	}
	if n.throughput > 0 {
		if err := check("throughput", p.throughput, n.throughput, p.throughput == 0); err != nil {
			return p, err
		}
		p.throughput = n.throughput
	}
	if len(n.tagsAdd) > 0 {
		merged := maps.Clone(p.tagsAdd)
		if merged == nil {
			merged = map[string]string{}
		}
		for k, v := range n.tagsAdd {
			if old, ok := merged[k]; ok && old != v {
				return p, conflictError{"tag " + k, old, v}
			}
			merged[k] = v
		}
		p.tagsAdd = merged
	}
	for _, k := range n.tagsDelete {
		if _, ok := p.tagsAdd[k]; ok {
			return p, conflictError{"tag " + k, "set", "delete"}
		}
		if !slices.Contains(p.tagsDelete, k) {
			p.tagsDelete = append(slices.Clone(p.tagsDelete), k)
		}
	}
	return p, nil
}

func (d *Driver) executeModify(ctx context.Context, volumeID string, r modifyRequest) (int32, error) {
	klog.FromContext(ctx).V(2).Info("Modifying volume", "volumeID", volumeID, "sizeBytes", r.sizeBytes, "type", r.volumeType,
		"iops", r.iops, "throughput", r.throughput)
	return d.cloud.ModifyDisk(ctx, volumeID, cloud.ModifyOptions{
		SizeBytes: r.sizeBytes, VolumeType: r.volumeType, IOPS: r.iops, IOPSPerGB: r.iopsPerGB,
		Throughput: r.throughput, TagsAdd: r.tagsAdd, TagsDelete: r.tagsDelete,
	})
}

func (d *Driver) submitModify(ctx context.Context, volumeID string, r modifyRequest) (int32, error) {
	size, err := d.modifier.Submit(ctx, volumeID, r)
	if err != nil {
		if ce, ok := err.(conflictError); ok {
			return 0, status.Errorf(codes.Aborted, "volume %s: %v", volumeID, ce)
		}
		return 0, cloudError(err, "modify volume %s", volumeID)
	}
	return size, nil
}

// ControllerExpandVolume implements csi.ControllerServer.
func (d *Driver) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	cr := req.GetCapacityRange()
	if cr == nil || cr.GetRequiredBytes() <= 0 && cr.GetLimitBytes() <= 0 {
		return nil, status.Error(codes.InvalidArgument, "capacity_range: required_bytes or limit_bytes is required")
	}
	want := cr.GetRequiredBytes()
	if want <= 0 {
		want = cr.GetLimitBytes()
	}
	want = cloud.RoundUpGiB(want) * gib
	if lim := cr.GetLimitBytes(); lim > 0 && want > lim {
		return nil, status.Errorf(codes.OutOfRange, "capacity_range: %d bytes rounded up to whole GiB (%d) exceeds limit_bytes %d", cr.GetRequiredBytes(), want, lim)
	}
	if !validVolumeID(id) {
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist", id)
	}
	size, err := d.submitModify(ctx, id, modifyRequest{sizeBytes: want})
	if err != nil {
		return nil, err
	}
	_, isBlock := req.GetVolumeCapability().GetAccessType().(*csi.VolumeCapability_Block)
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: int64(size) * gib, NodeExpansionRequired: !isBlock}, nil
}

// ControllerModifyVolume implements csi.ControllerServer (VolumeAttributesClass).
func (d *Driver) ControllerModifyVolume(ctx context.Context, req *csi.ControllerModifyVolumeRequest) (*csi.ControllerModifyVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	mp, err := params.ParseModify(req.GetMutableParameters(), false)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "mutable_parameters: %v", err)
	}
	tags, err := params.RenderTags(mp.TagSpecs, params.VolumeTemplateData{PVCName: mp.PVCName, PVCNamespace: mp.PVCNamespace, PVName: mp.PVName})
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "mutable_parameters: %v", err)
	}
	tagsDelete := append(mp.TagDeletions, iopsPerGBTags(mp, tags)...)
	if !validVolumeID(id) {
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist", id)
	}
	if err := d.checkMergedModify(ctx, id, mp); err != nil {
		return nil, err
	}
	r := modifyRequest{volumeType: mp.VolumeType, iops: mp.IOPS, iopsPerGB: mp.IOPSPerGB, throughput: mp.Throughput,
		tagsAdd: tags, tagsDelete: tagsDelete}
	if len(r.tagsAdd) == 0 {
		r.tagsAdd = nil
	}
	if _, err := d.submitModify(ctx, id, r); err != nil {
		return nil, err
	}
	return &csi.ControllerModifyVolumeResponse{}, nil
}
