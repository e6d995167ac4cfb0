package csiattach

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestIsFinal(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{status.Error(codes.InvalidArgument, "x"), true},
		{status.Error(codes.NotFound, "x"), true},
		{status.Error(codes.FailedPrecondition, "x"), true},
		{status.Error(codes.Internal, "x"), true},
		{status.Error(codes.DeadlineExceeded, "x"), false},
		{status.Error(codes.Canceled, "x"), false},
		{status.Error(codes.Unavailable, "x"), false},
		{status.Error(codes.ResourceExhausted, "x"), false},
		{status.Error(codes.Aborted, "x"), false},
		{errors.New("connection reset"), false},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), false},
	}
	for _, tc := range tests {
		if got := IsFinal(tc.err); got != tc.want {
			t.Errorf("IsFinal(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// pagedController serves ListVolumes in pages of its maxEntries and records the requests.
type pagedController struct {
	csi.ControllerClient
	volumes  []*csi.ListVolumesResponse_Entry
	requests []*csi.ListVolumesRequest
	deadline []bool
}

func (p *pagedController) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest, _ ...grpc.CallOption) (*csi.ListVolumesResponse, error) {
	p.requests = append(p.requests, req)
	_, ok := ctx.Deadline()
	p.deadline = append(p.deadline, ok)
	start := 0
	if req.StartingToken != "" {
		if _, err := fmt.Sscan(req.StartingToken, &start); err != nil {
			return nil, status.Error(codes.Aborted, "bad token")
		}
	}
	end := len(p.volumes)
	if req.MaxEntries > 0 && start+int(req.MaxEntries) < end {
		end = start + int(req.MaxEntries)
	}
	rsp := &csi.ListVolumesResponse{Entries: p.volumes[start:end]}
	if end < len(p.volumes) {
		rsp.NextToken = fmt.Sprint(end)
	}
	return rsp, nil
}

func entry(id string, nodes ...string) *csi.ListVolumesResponse_Entry {
	return &csi.ListVolumesResponse_Entry{
		Volume: &csi.Volume{VolumeId: id},
		Status: &csi.ListVolumesResponse_VolumeStatus{PublishedNodeIds: nodes},
	}
}

func TestListPublishedPages(t *testing.T) {
	ctrl := &pagedController{volumes: []*csi.ListVolumesResponse_Entry{
		entry("v1", "n1"), entry("v2"), entry("v3", "n1", "n2"), entry("v4", "n3"), entry("v5", "n2"),
	}}
	got, err := New(ctrl, time.Second, 2).ListPublished(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"v1": {"n1"}, "v2": nil, "v3": {"n1", "n2"}, "v4": {"n3"}, "v5": {"n2"}}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("ListPublished = %v, want %v", got, want)
	}
	if len(ctrl.requests) != 3 {
		t.Errorf("ListVolumes calls = %d, want 3 pages of 2", len(ctrl.requests))
	}
	for i, r := range ctrl.requests {
		if r.MaxEntries != 2 || !ctrl.deadline[i] {
			t.Errorf("page %d: max_entries %d, deadline %v; want 2 and a per-page deadline", i, r.MaxEntries, ctrl.deadline[i])
		}
	}
}
