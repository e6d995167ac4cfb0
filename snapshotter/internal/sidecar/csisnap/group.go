package csisnap

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/shared/csiconn"
)

// GroupClient makes csi-snapshotter's GroupController calls over one gRPC connection.
type GroupClient csiconn.Bounded[csi.GroupControllerClient]

// NewGroup returns a GroupClient whose every call is bounded by timeout.
func NewGroup(group csi.GroupControllerClient, timeout time.Duration) *GroupClient {
	return &GroupClient{Client: group, Timeout: timeout}
}

// CreateGroup calls CreateVolumeGroupSnapshot and returns the group the driver answered with.
func (c *GroupClient) CreateGroup(ctx context.Context, req *csi.CreateVolumeGroupSnapshotRequest) (*csi.VolumeGroupSnapshot, error) {
	rsp, err := csiconn.Call(ctx, c.Timeout, c.Client.CreateVolumeGroupSnapshot, req)
	if err != nil {
		return nil, err
	}
	if rsp.GetGroupSnapshot().GetGroupSnapshotId() == "" {
		// Without an ID nothing can ever delete the group: "maybe created", never done.
		return nil, status.Errorf(codes.Unavailable, "CreateVolumeGroupSnapshot %q: the driver returned no group_snapshot_id", req.GetName())
	}
	return rsp.GetGroupSnapshot(), nil
}

// DeleteGroup calls DeleteVolumeGroupSnapshot.
func (c *GroupClient) DeleteGroup(ctx context.Context, req *csi.DeleteVolumeGroupSnapshotRequest) error {
	_, err := csiconn.Call(ctx, c.Timeout, c.Client.DeleteVolumeGroupSnapshot, req)
	return err
}

// GetGroup calls GetVolumeGroupSnapshot.
func (c *GroupClient) GetGroup(ctx context.Context, req *csi.GetVolumeGroupSnapshotRequest) (*csi.VolumeGroupSnapshot, error) {
	rsp, err := csiconn.Call(ctx, c.Timeout, c.Client.GetVolumeGroupSnapshot, req)
	if err != nil {
		return nil, err
	}
	return rsp.GetGroupSnapshot(), nil
}
