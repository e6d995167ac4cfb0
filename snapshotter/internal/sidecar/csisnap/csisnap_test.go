package csisnap

import (
	"context"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/shared/csiconn"
)

// fakeController answers CreateSnapshot and ListSnapshots with what is set on it; it embeds the interface so
// that any other call panics, which would be a bug in the code under test.
type fakeController struct {
	csi.ControllerClient
	create   *csi.CreateSnapshotResponse
	list     *csi.ListSnapshotsResponse
	err      error
	deadline bool // whether the call's context had a deadline
}

func (f *fakeController) CreateSnapshot(ctx context.Context, _ *csi.CreateSnapshotRequest, _ ...grpc.CallOption) (*csi.CreateSnapshotResponse, error) {
	_, f.deadline = ctx.Deadline()
	return f.create, f.err
}

func (f *fakeController) ListSnapshots(ctx context.Context, _ *csi.ListSnapshotsRequest, _ ...grpc.CallOption) (*csi.ListSnapshotsResponse, error) {
	_, f.deadline = ctx.Deadline()
	return f.list, f.err
}

func TestCreateSnapshot(t *testing.T) {
	ctx := context.Background()
	f := &fakeController{create: &csi.CreateSnapshotResponse{Snapshot: &csi.Snapshot{SnapshotId: "snap-1"}}}
	got, err := New(f, time.Minute).CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s"})
	if err != nil || got.GetSnapshotId() != "snap-1" || !f.deadline {
		t.Errorf("CreateSnapshot = %v, %v (deadline %v); want snap-1 under the --timeout deadline", got, err, f.deadline)
	}
	// A driver that answers without an ID may still have made a snapshot: not final, so the being-created
	// annotation stays and the call is repeated.
	f.create = &csi.CreateSnapshotResponse{Snapshot: &csi.Snapshot{}}
	if _, err := New(f, time.Minute).CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s"}); err == nil || csiconn.IsFinal(err) {
		t.Errorf("CreateSnapshot without snapshot_id: err = %v, want a non-final error", err)
	}
}

func TestGetSnapshot(t *testing.T) {
	ctx := context.Background()
	f := &fakeController{list: &csi.ListSnapshotsResponse{Entries: []*csi.ListSnapshotsResponse_Entry{{Snapshot: &csi.Snapshot{SnapshotId: "snap-1", ReadyToUse: true}}}}}
	got, err := New(f, time.Minute).GetSnapshot(ctx, &csi.ListSnapshotsRequest{SnapshotId: "snap-1"})
	if err != nil || got.GetSnapshotId() != "snap-1" {
		t.Errorf("GetSnapshot = %v, %v; want snap-1", got, err)
	}
	f.list = &csi.ListSnapshotsResponse{}
	if _, err := New(f, time.Minute).GetSnapshot(ctx, &csi.ListSnapshotsRequest{SnapshotId: "snap-1"}); status.Code(err) != codes.NotFound {
		t.Errorf("GetSnapshot of an unlisted ID: err = %v, want NotFound", err)
	}
}
