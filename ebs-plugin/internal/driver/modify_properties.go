package driver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ModifyVolumeProperties implements modifyrpc.Server, the call of upstream's volume-modifier-for-k8s sidecar:
// name is the volume ID and parameters the PVC's ebs.csi.aws.com/ annotations without the prefix (type, iops,
// throughput, tagSpecification_N, ...). It is ControllerModifyVolume with parameters as the mutable
// parameters, as upstream, so both go through the same checks and the same per-volume coalescer: an
// annotation change and a VolumeAttributesClass change in one window make one ModifyVolume.
func (d *Driver) ModifyVolumeProperties(ctx context.Context, name string, parameters, _ map[string]string) error {
	if name == "" {
		return status.Error(codes.InvalidArgument, "name (the volume ID) is required")
	}
	_, err := d.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: name, MutableParameters: parameters})
	return err
}
