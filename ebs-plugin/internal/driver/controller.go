package driver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/cloud"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/params"
)

var controllerCapabilities = []csi.ControllerServiceCapability_RPC_Type{
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
	csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
	csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
	csi.ControllerServiceCapability_RPC_GET_SNAPSHOT,
	csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
	csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	csi.ControllerServiceCapability_RPC_MODIFY_VOLUME,
}

// ControllerGetCapabilities implements csi.ControllerServer.
func (d *Driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: each(controllerCapabilities, func(c csi.ControllerServiceCapability_RPC_Type) *csi.ControllerServiceCapability {
		return &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: c}}}
	})}, nil
}

// each is the capability wrap makes of each type listed, in order: what the GetCapabilities calls answer.
func each[T, C any](types []T, wrap func(T) C) []C {
	out := make([]C, 0, len(types))
	for _, t := range types {
		out = append(out, wrap(t))
	}
	return out
}

// cloudError maps an EC2-layer error to a gRPC status at the CSI boundary.
func cloudError(err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	var pe *params.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe), errors.Is(err, cloud.ErrInvalidArgument):
		return status.Errorf(codes.InvalidArgument, "%s: %v", msg, err)
	case errors.Is(err, cloud.ErrNotFound):
		return status.Errorf(codes.NotFound, "%s: %v", msg, err)
	case errors.Is(err, cloud.ErrAlreadyExists):
		return status.Errorf(codes.AlreadyExists, "%s: %v", msg, err)
	case errors.Is(err, cloud.ErrLimitExceeded):
		return status.Errorf(codes.ResourceExhausted, "%s: %v", msg, err)
	case errors.Is(err, cloud.ErrVolumeInUse), errors.Is(err, cloud.ErrModificationPending):
		return status.Errorf(codes.FailedPrecondition, "%s: %v", msg, err)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "%s: %v", msg, err)
	case errors.Is(err, context.Canceled):
		return status.Errorf(codes.Canceled, "%s: %v", msg, err)
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		return err
	}
	return status.Errorf(codes.Internal, "%s: %v", msg, err)
}

func aborted(what string) error {
	return status.Errorf(codes.Aborted, "an operation on %s is already in progress", what)
}

// Volume and snapshot IDs are EC2's; anything else cannot exist, so it is NotFound without asking EC2.
func validVolumeID(id string) bool   { return validID(id, "vol-") }
func validSnapshotID(id string) bool { return validID(id, "snap-") }
func validInstanceID(id string) bool { return validID(id, "i-") }

func validID(id, prefix string) bool {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || rest == "" || len(rest) > 32 {
		return false
	}
	for _, r := range rest {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// checkCapabilities validates access modes and access types. multiAttach reports whether any capability
// asks for several nodes (allowed for io2 block volumes only, checked by the caller).
func checkCapabilities(caps []*csi.VolumeCapability) (block, multiAttach bool, err error) {
	if len(caps) == 0 {
		return false, false, status.Error(codes.InvalidArgument, "volume_capabilities: at least one is required")
	}
	for i, c := range caps {
		if c == nil || c.GetAccessMode() == nil {
			return false, false, status.Errorf(codes.InvalidArgument, "volume_capabilities[%d]: access_mode is required", i)
		}
		switch c.GetAccessType().(type) {
		case *csi.VolumeCapability_Block:
			block = true
		case *csi.VolumeCapability_Mount:
			fs := c.GetMount().GetFsType()
			if _, ok := params.FileSystems[fs]; fs != "" && !ok {
				return false, false, status.Errorf(codes.InvalidArgument, "volume_capabilities[%d].mount.fs_type %q: want one of ext2, ext3, ext4, xfs", i, fs)
			}
		default:
			return false, false, status.Errorf(codes.InvalidArgument, "volume_capabilities[%d]: access_type (block or mount) is required", i)
		}
		switch mode := c.GetAccessMode().GetMode(); mode {
		case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER:
		case csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER:
			multiAttach = true
		default:
			return false, false, status.Errorf(codes.InvalidArgument, "volume_capabilities[%d].access_mode %s is not supported by EBS", i, mode)
		}
	}
	if multiAttach {
		for i, c := range caps {
			if c.GetBlock() == nil {
				return false, false, status.Errorf(codes.InvalidArgument, "volume_capabilities[%d]: MULTI_NODE_MULTI_WRITER needs block access (multi-attach has no cluster filesystem)", i)
			}
		}
	}
	return block, multiAttach, nil
}
