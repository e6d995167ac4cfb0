package csimock

import (
	"context"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ControllerModifyVolume is the method name of ControllerModifyVolume for the BeforeCall hook and Calls.
const ControllerModifyVolume = "/csi.v1.Controller/ControllerModifyVolume"

// InfeasibleValue is the mutable parameter value the driver refuses with InvalidArgument, so a test can
// write a VolumeAttributesClass the driver cannot apply.
const InfeasibleValue = "infeasible"

// ControllerCapsWithModify returns the default controller capabilities plus MODIFY_VOLUME, for
// Options.ControllerCaps (the default set leaves it out, so the provisioner's tests see the driver they
// always saw).
func ControllerCapsWithModify() []csi.ControllerServiceCapability_RPC_Type {
	return append(append([]csi.ControllerServiceCapability_RPC_Type(nil), defaultControllerCaps...),
		csi.ControllerServiceCapability_RPC_MODIFY_VOLUME)
}

// ControllerModifyVolume merges the mutable parameters into the volume's Parameters. A parameter whose value
// is InfeasibleValue makes the whole call fail with InvalidArgument naming it, and changes nothing.
func (s controller) ControllerModifyVolume(_ context.Context, req *csi.ControllerModifyVolumeRequest) (*csi.ControllerModifyVolumeResponse, error) {
	if err := s.d.requireCap(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME); err != nil {
		return nil, err
	}
	for k, v := range req.GetMutableParameters() {
		if v == InfeasibleValue {
			return nil, status.Errorf(codes.InvalidArgument, "mutable parameter %q: value %q is not supported", k, v)
		}
	}
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	vol, ok := s.d.volumes[req.GetVolumeId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q not found", req.GetVolumeId())
	}
	params := map[string]string{}
	for k, v := range vol.Parameters {
		params[k] = v
	}
	for k, v := range req.GetMutableParameters() {
		// The sidecar's extra metadata is not a property of the volume.
		if !strings.HasPrefix(k, "csi.storage.k8s.io/") {
			params[k] = v
		}
	}
	vol.Parameters = params
	return &csi.ControllerModifyVolumeResponse{}, nil
}
