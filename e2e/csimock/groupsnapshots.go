package csimock

import (
	"context"
	"slices"
	"sort"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Method names of the GroupController service, for the BeforeCall hook and Calls.
const (
	CreateVolumeGroupSnapshot = "/csi.v1.GroupController/CreateVolumeGroupSnapshot"
	DeleteVolumeGroupSnapshot = "/csi.v1.GroupController/DeleteVolumeGroupSnapshot"
	GetVolumeGroupSnapshot    = "/csi.v1.GroupController/GetVolumeGroupSnapshot"
)

// GroupSnapshot is one group snapshot the driver holds: a snapshot of each source volume, taken together.
type GroupSnapshot struct {
	ID   string
	Name string
	// SnapshotIDs are the members' snapshot IDs, in the order of the source volumes.
	SnapshotIDs []string
}

// GroupSnapshots returns a copy of every group snapshot the driver holds, sorted by ID.
func (d *Driver) GroupSnapshots() []GroupSnapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]GroupSnapshot, 0, len(d.groups))
	for _, g := range d.groups {
		c := *g
		c.SnapshotIDs = slices.Clone(g.SnapshotIDs)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// groupIdentity is the identity service of a driver with Options.GroupSnapshots: it adds
// GROUP_CONTROLLER_SERVICE to the plugin capabilities.
type groupIdentity struct{ identity }

func (s groupIdentity) GetPluginCapabilities(ctx context.Context, req *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	rsp, err := s.identity.GetPluginCapabilities(ctx, req)
	if err != nil {
		return nil, err
	}
	rsp.Capabilities = append(rsp.Capabilities, &csi.PluginCapability{Type: &csi.PluginCapability_Service_{
		Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE}}})
	return rsp, nil
}

type groupController struct {
	csi.UnimplementedGroupControllerServer
	d *Driver
}

func (s groupController) GroupControllerGetCapabilities(context.Context, *csi.GroupControllerGetCapabilitiesRequest) (*csi.GroupControllerGetCapabilitiesResponse, error) {
	return &csi.GroupControllerGetCapabilitiesResponse{Capabilities: []*csi.GroupControllerServiceCapability{{
		Type: &csi.GroupControllerServiceCapability_Rpc{Rpc: &csi.GroupControllerServiceCapability_RPC{
			Type: csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT}},
	}}}, nil
}

// CreateVolumeGroupSnapshot takes a ready snapshot of every source volume; the same name and sources answer
// the same group, as the CSI spec asks.
func (s groupController) CreateVolumeGroupSnapshot(_ context.Context, req *csi.CreateVolumeGroupSnapshotRequest) (*csi.CreateVolumeGroupSnapshotResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	if len(req.GetSourceVolumeIds()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "source_volume_ids is required")
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if id, ok := d.groupByName[req.GetName()]; ok {
		g := d.groups[id]
		if !slices.Equal(d.groupSourcesLocked(g), req.GetSourceVolumeIds()) {
			return nil, status.Errorf(codes.AlreadyExists, "group snapshot %q exists for other volumes", req.GetName())
		}
		return &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: d.groupCSILocked(g)}, nil
	}
	for _, vol := range req.GetSourceVolumeIds() {
		if _, ok := d.volumes[vol]; !ok {
			return nil, status.Errorf(codes.NotFound, "source_volume_ids: volume %q not found", vol)
		}
	}
	d.nextID++
	g := &GroupSnapshot{ID: "group-" + strconv.Itoa(d.nextID), Name: req.GetName()}
	for _, vol := range req.GetSourceVolumeIds() {
		snap := d.snapshotLocked(req.GetName()+"-"+vol, vol, d.volumes[vol].CapacityBytes)
		g.SnapshotIDs = append(g.SnapshotIDs, snap.ID)
	}
	d.groups[g.ID] = g
	d.groupByName[g.Name] = g.ID
	return &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: d.groupCSILocked(g)}, nil
}

// DeleteVolumeGroupSnapshot forgets a group and its members; the snapshot IDs must be the group's, as the spec
// asks. An unknown group is already deleted.
func (s groupController) DeleteVolumeGroupSnapshot(_ context.Context, req *csi.DeleteVolumeGroupSnapshotRequest) (*csi.DeleteVolumeGroupSnapshotResponse, error) {
	if req.GetGroupSnapshotId() == "" {
		return nil, status.Error(codes.InvalidArgument, "group_snapshot_id is required")
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	g, ok := d.groups[req.GetGroupSnapshotId()]
	if !ok {
		return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
	}
	if !sameSet(g.SnapshotIDs, req.GetSnapshotIds()) {
		return nil, status.Errorf(codes.InvalidArgument, "snapshot_ids %v are not the members %v of group %s", req.GetSnapshotIds(), g.SnapshotIDs, g.ID)
	}
	for _, id := range g.SnapshotIDs {
		if snap, ok := d.snapshots[id]; ok {
			delete(d.snapshotByName, snap.Name)
			delete(d.snapshots, id)
		}
	}
	delete(d.groupByName, g.Name)
	delete(d.groups, g.ID)
	return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
}

// GetVolumeGroupSnapshot answers a group the driver holds.
func (s groupController) GetVolumeGroupSnapshot(_ context.Context, req *csi.GetVolumeGroupSnapshotRequest) (*csi.GetVolumeGroupSnapshotResponse, error) {
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	g, ok := d.groups[req.GetGroupSnapshotId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "group snapshot %q not found", req.GetGroupSnapshotId())
	}
	return &csi.GetVolumeGroupSnapshotResponse{GroupSnapshot: d.groupCSILocked(g)}, nil
}

func (d *Driver) groupSourcesLocked(g *GroupSnapshot) []string {
	var out []string
	for _, id := range g.SnapshotIDs {
		if snap, ok := d.snapshots[id]; ok {
			out = append(out, snap.SourceVolumeID)
		}
	}
	return out
}

func (d *Driver) groupCSILocked(g *GroupSnapshot) *csi.VolumeGroupSnapshot {
	out := &csi.VolumeGroupSnapshot{GroupSnapshotId: g.ID, CreationTime: timestamppb.Now(), ReadyToUse: true}
	for _, id := range g.SnapshotIDs {
		if snap, ok := d.snapshots[id]; ok {
			member := snap.csi()
			member.GroupSnapshotId = g.ID
			out.Snapshots = append(out.Snapshots, member)
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
