package csiattach

import (
	"context"
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
