// Package csisnap holds the CSI controller calls csi-snapshotter makes: CreateSnapshot, DeleteSnapshot and
// ListSnapshots for one snapshot ID, each bounded by the --timeout flag.
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
	if rsp.GetSnapshot().GetSnapshotId() == "" {
		// Without an ID nothing can ever delete the snapshot: treat it as "maybe created", never as done.
		return nil, status.Errorf(codes.Unavailable, "CreateSnapshot %q: the driver returned no snapshot_id", req.GetName())
	}
	return rsp.GetSnapshot(), nil
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
