// Package testutil holds the provisioner's test helpers: a fake CSI controller and object builders.
package testutil

import (
	"context"
	"fmt"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FakeCSI is an in-memory CSI controller: CreateVolume is idempotent by name, volume IDs differ from names (as in
// real drivers), and errors can be injected per call.
type FakeCSI struct {
	mu sync.Mutex
	// Volumes maps volume ID to the request that created it.
	Volumes map[string]*csi.CreateVolumeRequest
	byName  map[string]string
	// Creates and Deletes are the requests received, in order.
	Creates []*csi.CreateVolumeRequest
	Deletes []*csi.DeleteVolumeRequest
	// CreateErr, when set, is returned (and nothing created) for the next calls; CreateErrs are used first, one per call.
	CreateErrs []error
	CreateErr  error
	DeleteErr  error
	// CreatedTopology is the accessible topology of new volumes.
	CreatedTopology []*csi.Topology
	// CapacityBytes, when non-zero, is the size of new volumes instead of the requested size.
	CapacityBytes int64
	// Available is GetCapacity's answer per value of the topology key "zone" ("" for a request without
	// topology); CapacityErr, when set, is returned instead. CapacityReqs are the requests received.
	Available    map[string]int64
	CapacityErr  error
	CapacityReqs []*csi.GetCapacityRequest
	next         int
}

// NewFakeCSI returns an empty FakeCSI.
func NewFakeCSI() *FakeCSI {
	return &FakeCSI{Volumes: map[string]*csi.CreateVolumeRequest{}, byName: map[string]string{}}
}

// CreateVolume implements provision.CSIController.
func (f *FakeCSI) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest, _ ...grpc.CallOption) (*csi.CreateVolumeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Creates = append(f.Creates, req)
	if len(f.CreateErrs) > 0 {
		err := f.CreateErrs[0]
		f.CreateErrs = f.CreateErrs[1:]
		if err != nil {
			return nil, err
		}
	} else if f.CreateErr != nil {
		return nil, f.CreateErr
	}
	id, ok := f.byName[req.Name]
	if !ok {
		f.next++
		id = fmt.Sprintf("vol-%04d", f.next)
		f.byName[req.Name] = id
		f.Volumes[id] = req
	}
	size := req.GetCapacityRange().GetRequiredBytes()
	if f.CapacityBytes != 0 {
		size = f.CapacityBytes
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId: id, CapacityBytes: size, AccessibleTopology: f.CreatedTopology,
		VolumeContext: map[string]string{"fake/name": req.Name}, ContentSource: req.VolumeContentSource,
	}}, nil
}

// DeleteVolume implements provision.CSIController.
func (f *FakeCSI) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest, _ ...grpc.CallOption) (*csi.DeleteVolumeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Deletes = append(f.Deletes, req)
	if f.DeleteErr != nil {
		return nil, f.DeleteErr
	}
	if r, ok := f.Volumes[req.VolumeId]; ok {
		delete(f.byName, r.Name)
		delete(f.Volumes, req.VolumeId)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// GetCapacity implements provision.CSIController.
func (f *FakeCSI) GetCapacity(_ context.Context, req *csi.GetCapacityRequest, _ ...grpc.CallOption) (*csi.GetCapacityResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.CapacityReqs = append(f.CapacityReqs, req)
	if f.CapacityErr != nil {
		return nil, f.CapacityErr
	}
	return &csi.GetCapacityResponse{AvailableCapacity: f.Available[req.GetAccessibleTopology().GetSegments()["zone"]]}, nil
}

// Put records an existing volume, as if an earlier CreateVolume had made it.
func (f *FakeCSI) Put(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	id := fmt.Sprintf("vol-%04d", f.next)
	f.byName[name] = id
	f.Volumes[id] = &csi.CreateVolumeRequest{Name: name}
	return id
}

// Count returns how many volumes the fake holds.
func (f *FakeCSI) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.Volumes)
}

// Code is a gRPC status error with code c.
func Code(c codes.Code) error { return status.Error(c, "injected "+c.String()) }
