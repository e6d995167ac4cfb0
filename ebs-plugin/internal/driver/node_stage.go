package driver

import (
	"context"
	"errors"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/mounter"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/params"
)

// NodeStageVolume implements csi.NodeServer: find the device, format it if blank, mount it at the staging
// path, and grow the filesystem if the volume was expanded while detached.
func (d *Driver) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	volID, target, vc := req.GetVolumeId(), req.GetStagingTargetPath(), req.GetVolumeCapability()
	switch {
	case volID == "":
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	case target == "":
		return nil, status.Error(codes.InvalidArgument, "staging_target_path is required")
	case vc == nil:
		return nil, status.Error(codes.InvalidArgument, "volume_capability is required")
	}
	block, _, err := checkCapabilities([]*csi.VolumeCapability{vc})
	if err != nil {
		return nil, err
	}
	if block {
		return &csi.NodeStageVolumeResponse{}, nil // raw block volumes are bind-mounted at publish
	}
	fsType := vc.GetMount().GetFsType()
	if fsType == "" {
		fsType = params.DefaultFsType
	}
	flags, err := mounter.ParseMountFlags(vc.GetMount().GetMountFlags())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "volume_capability.mount.mount_flags: %v", err)
	}
	format, err := params.FormatFromContext(req.GetVolumeContext(), fsType)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "volume_context: %v", err)
	}
	partition, err := partitionOf(req.GetVolumeContext())
	if err != nil {
		return nil, err
	}
	release, ok := d.inFlight.Insert("node/" + volID)
	if !ok {
		return nil, aborted("volume " + volID)
	}
	defer release()

	device, err := d.attachedDevice(volID, req.GetPublishContext(), partition)
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx).WithValues("volumeID", volID, "device", device, "target", target)
	if staged, err := d.stagedAt(target, device); err != nil {
		return nil, err
	} else if staged {
		logger.V(4).Info("Volume already staged")
		return &csi.NodeStageVolumeResponse{}, nil
	}
	options := flags
	if fsType == "xfs" {
		// Snapshots and clones carry their source's UUID; XFS refuses two mounts with one UUID.
		options = append(options, "nouuid")
	}
	formatArgs := d.mounter.FormatArgs(fsType, format)
	if err := d.mounter.FormatAndMountSensitiveWithFormatOptions(device, target, fsType, options, nil, formatArgs); err != nil {
		return nil, status.Errorf(codes.Internal, "format and mount %s at %s as %s: %v", device, target, fsType, err)
	}
	if err := d.mounter.Resize(device, target); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", volID, err)
	}
	logger.V(2).Info("Volume staged", "fsType", fsType)
	return &csi.NodeStageVolumeResponse{}, nil
}

// NodeUnstageVolume implements csi.NodeServer.
func (d *Driver) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	volID, target := req.GetVolumeId(), req.GetStagingTargetPath()
	if volID == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "staging_target_path is required")
	}
	release, ok := d.inFlight.Insert("node/" + volID)
	if !ok {
		return nil, aborted("volume " + volID)
	}
	defer release()
	for {
		mounted, err := d.mounter.IsMountPoint(target)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return &csi.NodeUnstageVolumeResponse{}, nil
			}
			return nil, status.Errorf(codes.Internal, "check staging_target_path %s: %v", target, err)
		}
		if !mounted {
			return &csi.NodeUnstageVolumeResponse{}, nil
		}
		if err := d.mounter.Unmount(target); err != nil {
			return nil, status.Errorf(codes.Internal, "unmount %s: %v", target, err)
		}
		klog.FromContext(ctx).V(2).Info("Volume unstaged", "volumeID", volID, "target", target)
	}
}

// attachedDevice finds the device of volID on this node (the publish context's path, else by its serial),
// checks it is that volume, and names the partition the volume context asks for.
func (d *Driver) attachedDevice(volID string, publishContext map[string]string, partition string) (string, error) {
	device, err := d.mounter.FindDevice(publishContext[DevicePathKey], volID)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", status.Errorf(codes.NotFound, "volume %s: %v", volID, err)
		}
		return "", status.Errorf(codes.Internal, "volume %s: %v", volID, err)
	}
	if err := d.mounter.VerifyDevice(device, volID); err != nil {
		return "", status.Errorf(codes.FailedPrecondition, "volume %s: %v", volID, err)
	}
	return partitionDevice(device, partition), nil
}

// stagedAt creates target if needed and reports whether device is mounted there already (a retried stage); a
// different device there is AlreadyExists.
func (d *Driver) stagedAt(target, device string) (bool, error) {
	if err := os.MkdirAll(target, 0o750); err != nil {
		return false, status.Errorf(codes.Internal, "create staging_target_path %s: %v", target, err)
	}
	mounted, err := d.mounter.IsMountPoint(target)
	if err != nil {
		return false, status.Errorf(codes.Internal, "check staging_target_path %s: %v", target, err)
	}
	if !mounted {
		return false, nil
	}
	current, _, err := d.mounter.DeviceForMount(target)
	if err != nil {
		return false, status.Errorf(codes.Internal, "read mount of %s: %v", target, err)
	}
	if current != device {
		return false, status.Errorf(codes.AlreadyExists, "staging_target_path %s already has %s mounted, not %s", target, current, device)
	}
	return true, nil
}
