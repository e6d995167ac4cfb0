package driver

import (
	"context"
	"errors"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/s3-node/internal/mounter"
)

// NodeUnpublishVolume unmounts the workload's bind mount only: the shared source stays until the
// controller marks its Mountpoint Pod needs-unmount (the unmounter). A missing target is success; one
// whose Mountpoint is gone is unmounted lazily.
func (d *Driver) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target_path is required")
	}
	mounted, err := mounter.IsMountPoint(d.opts.Mounter.Sys(), target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "read the mount table: %v", err)
	}
	if mounted {
		if err := d.opts.Mounter.Unmount(target); err != nil {
			return nil, status.Errorf(codes.Internal, "unmount %s: %v", target, err)
		}
	}
	// The kubelet removes the directory too; removing it here makes a retry see a clean state.
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		klog.FromContext(ctx).V(2).Info("Target directory left in place", "target", target, "err", err.Error())
	}
	klog.FromContext(ctx).V(2).Info("Volume unpublished", "volumeID", req.GetVolumeId(), "target", target, "wasMounted", mounted)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
