package csicontroller

import (
	"context"
	"errors"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ControllerGetCapabilities lists CREATE_DELETE_VOLUME only: there is nothing to attach, expand or
// snapshot in a key prefix.
func (s *Server) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}},
	}}}, nil
}

// ValidateVolumeCapabilities is required of every controller service by the CSI spec; it checks the ID's
// form and the capabilities, not S3 (the prefix need not hold objects to exist).
func (s *Server) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if _, err := parseVolumeID(req.GetVolumeId()); err != nil {
		if errors.Is(err, errNotDynamic) {
			return nil, status.Errorf(codes.NotFound, "volume %q was not provisioned by this controller", req.GetVolumeId())
		}
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: req.GetParameters(),
	}}, nil
}

// checkCapabilities accepts file system access in every access mode (Mountpoint serves many readers and
// writers on many nodes) and refuses block access, which a prefix cannot give.
func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return errors.New("volume_capabilities are required")
	}
	for i, c := range caps {
		if c.GetBlock() != nil {
			return fmt.Errorf("volume_capabilities[%d]: block access is not supported: an S3 volume is a file system (volumeMode: Filesystem)", i)
		}
		if c.GetMount() == nil {
			return fmt.Errorf("volume_capabilities[%d]: the mount access type is required", i)
		}
		if c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_UNKNOWN {
			return fmt.Errorf("volume_capabilities[%d]: access_mode is required", i)
		}
	}
	return nil
}
