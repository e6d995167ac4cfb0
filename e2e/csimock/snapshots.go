package csimock

import (
	"context"
	"sort"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Snapshot is one snapshot the driver holds; a volume restored from it must not be smaller.
type Snapshot struct {
	ID             string
	Name           string
	SourceVolumeID string
	SizeBytes      int64
}

// Snapshots returns a copy of every snapshot the driver holds, sorted by ID.
func (d *Driver) Snapshots() []Snapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Snapshot, 0, len(d.snapshots))
	for _, s := range d.snapshots {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// AddSnapshot puts a snapshot into the driver as if it had been taken earlier (what a pre-provisioned
// VolumeSnapshotContent points at) and returns it.
func (d *Driver) AddSnapshot(name string, size int64) Snapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	return *d.snapshotLocked(name, "", size)
}

func (d *Driver) snapshotLocked(name, source string, size int64) *Snapshot {
	d.nextID++
	s := &Snapshot{ID: "snap-" + strconv.Itoa(d.nextID), Name: name, SourceVolumeID: source, SizeBytes: size}
	d.snapshots[s.ID] = s
	d.snapshotByName[name] = s.ID
	return s
}

func (s *Snapshot) csi() *csi.Snapshot {
	return &csi.Snapshot{SnapshotId: s.ID, SourceVolumeId: s.SourceVolumeID, SizeBytes: s.SizeBytes,
		CreationTime: timestamppb.Now(), ReadyToUse: true}
}

// CreateSnapshot takes a ready snapshot of an existing volume; the same name and source answer the same
// snapshot, as the CSI spec asks.
func (s controller) CreateSnapshot(_ context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if err := s.d.requireCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT); err != nil {
		return nil, err
	}
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	if req.GetSourceVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "source_volume_id is required")
	}
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if id, ok := s.d.snapshotByName[req.GetName()]; ok {
		snap := s.d.snapshots[id]
		if snap.SourceVolumeID != req.GetSourceVolumeId() {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %q exists for volume %q", req.GetName(), snap.SourceVolumeID)
		}
		return &csi.CreateSnapshotResponse{Snapshot: snap.csi()}, nil
	}
	v, ok := s.d.volumes[req.GetSourceVolumeId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "source_volume_id: volume %q not found", req.GetSourceVolumeId())
	}
	return &csi.CreateSnapshotResponse{Snapshot: s.d.snapshotLocked(req.GetName(), v.ID, v.CapacityBytes).csi()}, nil
}

// DeleteSnapshot forgets a snapshot; an unknown ID is already deleted.
func (s controller) DeleteSnapshot(_ context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if err := s.d.requireCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT); err != nil {
		return nil, err
	}
	if req.GetSnapshotId() == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot_id is required")
	}
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if snap, ok := s.d.snapshots[req.GetSnapshotId()]; ok {
		delete(s.d.snapshotByName, snap.Name)
		delete(s.d.snapshots, snap.ID)
	}
	return &csi.DeleteSnapshotResponse{}, nil
}
