package driver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ValidateVolumeCapabilities implements csi.ControllerServer.
func (d *Driver) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume_capabilities: at least one is required")
	}
	if !validVolumeID(id) {
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist", id)
	}
	disk, err := d.cloud.GetDisk(ctx, id)
	if err != nil {
		return nil, cloudError(err, "volume %s", id)
	}
	resp := &csi.ValidateVolumeCapabilitiesResponse{}
	_, multi, err := checkCapabilities(req.GetVolumeCapabilities())
	if err != nil {
		resp.Message = status.Convert(err).Message()
		return resp, nil
	}
	if multi && !disk.MultiAttach {
		resp.Message = "MULTI_NODE_MULTI_WRITER needs a volume created with multi-attach"
		return resp, nil
	}
	resp.Confirmed = &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}
	return resp, nil
}
