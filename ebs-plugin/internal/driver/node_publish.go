package driver

import (
	"context"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/mounter"
)

// NodePublishVolume implements csi.NodeServer: a bind mount of the staged filesystem, or of the device onto
// a file for raw block volumes.
func (d *Driver) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	volID, target, staging, vc := req.GetVolumeId(), req.GetTargetPath(), req.GetStagingTargetPath(), req.GetVolumeCapability()
	switch {
	case volID == "":
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	case target == "":
		return nil, status.Error(codes.InvalidArgument, "target_path is required")
	case vc == nil:
		return nil, status.Error(codes.InvalidArgument, "volume_capability is required")
	}
	block, _, err := checkCapabilities([]*csi.VolumeCapability{vc})
	if err != nil {
		return nil, err
	}
	if !block && staging == "" {
		return nil, status.Error(codes.InvalidArgument, "staging_target_path is required")
	}
	flags, err := mounter.ParseMountFlags(vc.GetMount().GetMountFlags())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "volume_capability.mount.mount_flags: %v", err)
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

	options := []string{"bind"}
	if req.GetReadonly() {
		options = append(options, "ro")
	}
	var source string
	if block {
		// As at NodeStageVolume, the device is checked to be the volume: the devicePath of a Xen instance may
		// by now be another volume's device, and a raw block Pod would write straight onto it.
		if source, err = d.attachedDevice(volID, req.GetPublishContext(), partition); err != nil {
			return nil, err
		}
		if err := blockTarget(target); err != nil {
			return nil, err
		}
	} else {
		source = staging
		mountedStaging, err := d.mounter.IsMountPoint(staging)
		if err != nil || !mountedStaging {
			return nil, status.Errorf(codes.FailedPrecondition, "staging_target_path %s is not staged", staging)
		}
		if err := os.MkdirAll(target, 0o750); err != nil {
			return nil, status.Errorf(codes.Internal, "create target_path %s: %v", target, err)
		}
		options = append(options, flags...)
	}
	mounted, err := d.mounter.IsMountPoint(target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "check target_path %s: %v", target, err)
	}
	if mounted {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := d.mounter.Mount(source, target, "", options); err != nil {
		return nil, status.Errorf(codes.Internal, "bind mount %s at %s: %v", source, target, err)
	}
	klog.FromContext(ctx).V(2).Info("Volume published", "volumeID", volID, "target", target, "block", block, "readonly", req.GetReadonly())
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume implements csi.NodeServer. It unmounts and removes the target path.
func (d *Driver) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	volID, target := req.GetVolumeId(), req.GetTargetPath()
	if volID == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target_path is required")
	}
	release, ok := d.inFlight.Insert("node/" + volID)
	if !ok {
		return nil, aborted("volume " + volID)
	}
	defer release()
	if err := d.mounter.CleanupMountPoint(target); err != nil {
		return nil, status.Errorf(codes.Internal, "unmount %s: %v", target, err)
	}
	klog.FromContext(ctx).V(2).Info("Volume unpublished", "volumeID", volID, "target", target)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// blockTarget creates the file a raw block volume is bind-mounted on, and its directory.
func blockTarget(target string) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return status.Errorf(codes.Internal, "create parent of target_path %s: %v", target, err)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o640)
	if err != nil {
		return status.Errorf(codes.Internal, "create target_path file %s: %v", target, err)
	}
	_ = f.Close() // opened read-only only to create it
	return nil
}
