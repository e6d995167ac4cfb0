package csimock

import (
	"context"
	"slices"
	"sort"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type identity struct {
	csi.UnimplementedIdentityServer
	d *Driver
}

func (s identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: s.d.opts.Name, VendorVersion: "0.0.1"}, nil
}

func (s identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	var caps []*csi.PluginCapability
	add := func(t csi.PluginCapability_Service_Type) {
		caps = append(caps, &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}})
	}
	if !s.d.opts.NoControllerService {
		add(csi.PluginCapability_Service_CONTROLLER_SERVICE)
	}
	if s.d.opts.TopologyKey != "" {
		add(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

func (s identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

type controller struct {
	csi.UnimplementedControllerServer
	d *Driver
}

func (s controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	resp := &csi.ControllerGetCapabilitiesResponse{}
	for _, c := range s.d.opts.ControllerCaps {
		resp.Capabilities = append(resp.Capabilities, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: c}},
		})
	}
	return resp, nil
}

func (s controller) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := s.d.requireCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME); err != nil {
		return nil, err
	}
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume_capabilities are required")
	}
	size := req.GetCapacityRange().GetRequiredBytes()
	if size == 0 {
		size = 1 << 30
	}
	if limit := req.GetCapacityRange().GetLimitBytes(); limit != 0 && limit < size {
		return nil, status.Errorf(codes.OutOfRange, "capacity_range: limit_bytes %d < required_bytes %d", limit, size)
	}
	source, sourceVolume := "", ""
	if src := req.GetVolumeContentSource(); src != nil {
		switch {
		case src.GetVolume() != nil:
			sourceVolume = src.GetVolume().GetVolumeId()
			source = "volume:" + sourceVolume
		case src.GetSnapshot() != nil:
			source = "snapshot:" + src.GetSnapshot().GetSnapshotId()
		}
	}
	topology := s.topologyFor(req.GetAccessibilityRequirements())

	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if sourceVolume != "" {
		if _, ok := s.d.volumes[sourceVolume]; !ok {
			return nil, status.Errorf(codes.NotFound, "volume_content_source: source volume %q not found", sourceVolume)
		}
	}
	if snapID := req.GetVolumeContentSource().GetSnapshot().GetSnapshotId(); snapID != "" {
		snap, ok := s.d.snapshots[snapID]
		if !ok {
			return nil, status.Errorf(codes.NotFound, "volume_content_source: snapshot %q not found", snapID)
		}
		if size < snap.SizeBytes {
			return nil, status.Errorf(codes.OutOfRange, "capacity_range: %d bytes < snapshot %s's %d", size, snapID, snap.SizeBytes)
		}
	}
	if id, ok := s.d.byName[req.GetName()]; ok {
		v := s.d.volumes[id]
		if v.CapacityBytes < size {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q exists with capacity %d < %d", req.GetName(), v.CapacityBytes, size)
		}
		return &csi.CreateVolumeResponse{Volume: v.csi()}, nil
	}
	v := s.d.createLocked(req.GetName(), size, req.GetParameters(), topology, source)
	resp := v.csi()
	resp.ContentSource = req.GetVolumeContentSource()
	return &csi.CreateVolumeResponse{Volume: resp}, nil
}

// topologyFor picks the first preferred, else requisite, segment's value of the driver's topology key.
func (s controller) topologyFor(req *csi.TopologyRequirement) map[string]string {
	key := s.d.opts.TopologyKey
	if key == "" {
		return nil
	}
	for _, list := range [][]*csi.Topology{req.GetPreferred(), req.GetRequisite()} {
		for _, t := range list {
			if v, ok := t.GetSegments()[key]; ok {
				return map[string]string{key: v}
			}
		}
	}
	return map[string]string{key: s.d.opts.NodeZone}
}

func (s controller) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if err := s.d.requireCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME); err != nil {
		return nil, err
	}
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	v, ok := s.d.volumes[req.GetVolumeId()]
	if !ok {
		return &csi.DeleteVolumeResponse{}, nil
	}
	if len(v.PublishedNodes) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is published to %v", v.ID, v.PublishedNodes)
	}
	delete(s.d.volumes, v.ID)
	delete(s.d.byName, v.Name)
	return &csi.DeleteVolumeResponse{}, nil
}

func (s controller) ControllerPublishVolume(_ context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if err := s.d.requireCap(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME); err != nil {
		return nil, err
	}
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	case req.GetNodeId() == "":
		return nil, status.Error(codes.InvalidArgument, "node_id is required")
	case req.GetVolumeCapability() == nil:
		return nil, status.Error(codes.InvalidArgument, "volume_capability is required")
	}
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	v, ok := s.d.volumes[req.GetVolumeId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q not found", req.GetVolumeId())
	}
	if !slices.Contains(v.PublishedNodes, req.GetNodeId()) {
		v.PublishedNodes = append(v.PublishedNodes, req.GetNodeId())
		sort.Strings(v.PublishedNodes)
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{"devicePath": "/dev/mock/" + v.ID}}, nil
}

func (s controller) ControllerUnpublishVolume(_ context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	if err := s.d.requireCap(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME); err != nil {
		return nil, err
	}
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if v, ok := s.d.volumes[req.GetVolumeId()]; ok {
		kept := v.PublishedNodes[:0]
		for _, n := range v.PublishedNodes {
			if req.GetNodeId() != "" && n != req.GetNodeId() {
				kept = append(kept, n)
			}
		}
		v.PublishedNodes = kept
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (s controller) ListVolumes(_ context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	if err := s.d.requireCap(csi.ControllerServiceCapability_RPC_LIST_VOLUMES); err != nil {
		return nil, err
	}
	vols := s.d.Volumes()
	start := 0
	if tok := req.GetStartingToken(); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 || n > len(vols) {
			return nil, status.Errorf(codes.Aborted, "starting_token %q is not valid", tok)
		}
		start = n
	}
	end := len(vols)
	if m := int(req.GetMaxEntries()); m > 0 && start+m < end {
		end = start + m
	}
	resp := &csi.ListVolumesResponse{}
	for i := start; i < end; i++ {
		v := vols[i]
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{
			Volume: v.csi(),
			Status: &csi.ListVolumesResponse_VolumeStatus{PublishedNodeIds: v.PublishedNodes},
		})
	}
	if end < len(vols) {
		resp.NextToken = strconv.Itoa(end)
	}
	return resp, nil
}

func (s controller) GetCapacity(context.Context, *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	if err := s.d.requireCap(csi.ControllerServiceCapability_RPC_GET_CAPACITY); err != nil {
		return nil, err
	}
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	return &csi.GetCapacityResponse{AvailableCapacity: s.d.opts.Capacity}, nil
}

func (s controller) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	if err := s.d.requireCap(csi.ControllerServiceCapability_RPC_EXPAND_VOLUME); err != nil {
		return nil, err
	}
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	v, ok := s.d.volumes[req.GetVolumeId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q not found", req.GetVolumeId())
	}
	size := req.GetCapacityRange().GetRequiredBytes()
	if size > s.d.opts.Capacity {
		// Beyond what the driver has: a size it can never reach, as a real backend refuses it.
		return nil, status.Errorf(codes.OutOfRange, "volume %q: required_bytes %d exceeds the driver's capacity %d", req.GetVolumeId(), size, s.d.opts.Capacity)
	}
	if size > v.CapacityBytes {
		v.CapacityBytes = size
	}
	// A raw block volume has no filesystem for the node to grow, as real block drivers (EBS among them) answer.
	_, block := req.GetVolumeCapability().GetAccessType().(*csi.VolumeCapability_Block)
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: v.CapacityBytes, NodeExpansionRequired: !block}, nil
}

func (s controller) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	s.d.mu.Lock()
	_, ok := s.d.volumes[req.GetVolumeId()]
	s.d.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q not found", req.GetVolumeId())
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities(),
	}}, nil
}

type node struct {
	csi.UnimplementedNodeServer
	d *Driver
}

func (s node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	resp := &csi.NodeGetInfoResponse{NodeId: s.d.opts.NodeID}
	if s.d.opts.TopologyKey != "" {
		resp.AccessibleTopology = &csi.Topology{Segments: map[string]string{s.d.opts.TopologyKey: s.d.opts.NodeZone}}
	}
	return resp, nil
}

func (s node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}
