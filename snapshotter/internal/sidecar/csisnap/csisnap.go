// Package csisnap holds the CSI calls csi-snapshotter makes: CreateSnapshot, DeleteSnapshot and ListSnapshots
// for one snapshot ID, and the GroupController's Create, Delete and GetVolumeGroupSnapshot, each bounded by the
// --timeout flag.
package csisnap

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/shared/csiconn"
)

// Client makes csi-snapshotter's CSI calls over one gRPC connection.
type Client csiconn.Bounded[csi.ControllerClient]

// New returns a Client whose every call is bounded by timeout.
func New(controller csi.ControllerClient, timeout time.Duration) *Client {
	return &Client{Client: controller, Timeout: timeout}
}

// CreateSnapshot calls CreateSnapshot and returns the snapshot the driver answered with.
func (c *Client) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.Snapshot, error) {
	rsp, err := csiconn.Call(ctx, c.Timeout, c.Client.CreateSnapshot, req)
	if err != nil {
		return nil, err
	}
	return withID(rsp.GetSnapshot(), rsp.GetSnapshot().GetSnapshotId(), "CreateSnapshot", req.GetName(), "snapshot_id")
}

// withID returns what a create call answered with, unless it carries no ID: without one nothing can ever
// delete the snapshot or group, so it is "maybe created" (Unavailable, retried), never done.
func withID[T any](created T, id, call, name, field string) (T, error) {
	if id == "" {
		var none T
		return none, status.Errorf(codes.Unavailable, "%s %q: the driver returned no %s", call, name, field)
	}
	return created, nil
}

// DeleteSnapshot calls DeleteSnapshot.
func (c *Client) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) error {
	_, err := csiconn.Call(ctx, c.Timeout, c.Client.DeleteSnapshot, req)
	return err
}

// GetSnapshot calls ListSnapshots for req.SnapshotId and returns its entry, or a NotFound error naming the ID
// when the driver lists none (upstream's GetSnapshotStatus).
func (c *Client) GetSnapshot(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.Snapshot, error) {
	rsp, err := csiconn.Call(ctx, c.Timeout, c.Client.ListSnapshots, req)
	if err != nil {
		return nil, err
	}
	for _, e := range rsp.GetEntries() {
		if s := e.GetSnapshot(); s != nil {
			return s, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "ListSnapshots: the driver lists no snapshot with snapshot_id %q", req.GetSnapshotId())
}

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
	group := rsp.GetGroupSnapshot()
	return withID(group, group.GetGroupSnapshotId(), "CreateVolumeGroupSnapshot", req.GetName(), "group_snapshot_id")
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
