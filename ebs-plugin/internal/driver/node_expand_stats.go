package driver

import (
	"context"
	"errors"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/mounter"
)

// NodeExpandVolume implements csi.NodeServer: grow the filesystem to the device's new size.
func (d *Driver) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	volID, path := req.GetVolumeId(), req.GetVolumePath()
	if volID == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if path == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_path is required")
	}
	if vc := req.GetVolumeCapability(); vc != nil {
		if _, _, err := checkCapabilities([]*csi.VolumeCapability{vc}); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, status.Errorf(codes.NotFound, "volume_path %s does not exist", path)
		}
		return nil, status.Errorf(codes.Internal, "volume_path %s: %v", path, err)
	}
	release, ok := d.inFlight.Insert("node/" + volID)
	if !ok {
		return nil, aborted("volume " + volID)
	}
	defer release()
	if mounter.IsBlockDevicePath(path) || req.GetVolumeCapability().GetBlock() != nil {
		// Nothing to grow: the device is the volume.
		size, err := d.mounter.DeviceSize(path)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: %v", volID, err)
		}
		return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
	}
	device, _, err := d.mounter.DeviceForMount(path)
	if err != nil || device == "" {
		return nil, status.Errorf(codes.NotFound, "volume_path %s is not a mounted volume", path)
	}
	if err := d.mounter.Resize(device, path); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", volID, err)
	}
	size, err := d.mounter.DeviceSize(device)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", volID, err)
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
}

// NodeGetVolumeStats implements csi.NodeServer. CSI v1.13 removed the alpha VolumeCondition from its
// response (field 2 is reserved); a volume's health is NodeGetVolumeHealth's answer (node_health.go). Stats
// keep failing with an error code when there is nothing to measure: NotFound when the path is gone,
// FailedPrecondition when it is no longer a mount, Internal when it cannot be read.
func (d *Driver) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	volID, path := req.GetVolumeId(), req.GetVolumePath()
	if volID == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if path == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_path is required")
	}
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, status.Errorf(codes.NotFound, "volume_path %s does not exist", path)
		}
		return nil, status.Errorf(codes.Internal, "volume_path %s cannot be read: %v", path, err)
	}
	if mounter.IsBlockDevicePath(path) {
		size, err := d.mounter.DeviceSize(path)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "block device %s: %v", path, err)
		}
		return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: size}}}, nil
	}
	mounted, err := d.mounter.IsMountPoint(path)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "check mount of %s: %v", path, err)
	}
	if !mounted {
		return nil, status.Errorf(codes.FailedPrecondition, "volume_path %s is not a mount point", path)
	}
	st, err := mounter.FilesystemStats(path)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", volID, err)
	}
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: st.TotalBytes, Available: st.AvailableBytes, Used: st.UsedBytes},
		{Unit: csi.VolumeUsage_INODES, Total: st.TotalInodes, Available: st.FreeInodes, Used: st.UsedInodes},
	}}, nil
}
