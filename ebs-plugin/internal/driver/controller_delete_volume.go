package driver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DeleteVolume implements csi.ControllerServer. A volume that does not exist is deleted.
func (d *Driver) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if !validVolumeID(id) {
		return &csi.DeleteVolumeResponse{}, nil
	}
	release, ok := d.inFlight.Insert("delete/" + id)
	if !ok {
		return nil, aborted("volume " + id)
	}
	defer release()
	if err := d.cloud.DeleteDisk(ctx, id); err != nil {
		return nil, cloudError(err, "delete volume %s", id)
	}
	return &csi.DeleteVolumeResponse{}, nil
}
