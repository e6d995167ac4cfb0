// Package testutil holds test helpers shared by the Stowage modules' unit tests.
package testutil

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// FakeCSIDriver is a tiny in-process CSI driver (identity, controller and node capability calls) served on a
// unix socket, for tests of code that talks to a driver. Its fields may be changed while it runs.
type FakeCSIDriver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer
	csi.UnimplementedGroupControllerServer

	mu sync.Mutex
	// Name is returned by GetPluginInfo.
	Name string
	// NotReadyProbes is how many Probe calls answer ready=false before the driver reports ready.
	NotReadyProbes int
	// ProbeErr, when set, is returned by every Probe call.
	ProbeErr error
	// Probes counts Probe calls.
	Probes int

	PluginServices      []csi.PluginCapability_Service_Type
	PluginExpansion     []csi.PluginCapability_VolumeExpansion_Type
	ControllerCaps      []csi.ControllerServiceCapability_RPC_Type
	NodeCaps            []csi.NodeServiceCapability_RPC_Type
	GroupControllerCaps []csi.GroupControllerServiceCapability_RPC_Type

	server *grpc.Server
	// Address is the socket path the driver listens on.
	Address string
}

// StartFakeCSIDriver serves d on a socket in t.TempDir() and stops it when the test ends.
func StartFakeCSIDriver(t testing.TB, d *FakeCSIDriver) *FakeCSIDriver {
	t.Helper()
	return StartFakeCSIDriverAt(t, d, filepath.Join(t.TempDir(), "csi.sock"))
}

// StartFakeCSIDriverAt serves d on the socket address, which must not exist, and stops it when the test ends.
// A driver restarted at the address of one that was stopped is what a sidecar sees when the driver's
// container restarts.
func StartFakeCSIDriverAt(t testing.TB, d *FakeCSIDriver, address string) *FakeCSIDriver {
	t.Helper()
	d.Address = address
	l, err := net.Listen("unix", d.Address)
	if err != nil {
		t.Fatalf("listening on %s: %v", d.Address, err)
	}
	d.server = grpc.NewServer()
	csi.RegisterIdentityServer(d.server, d)
	csi.RegisterControllerServer(d.server, d)
	csi.RegisterNodeServer(d.server, d)
	csi.RegisterGroupControllerServer(d.server, d)
	go func() { _ = d.server.Serve(l) }()
	t.Cleanup(d.Stop)
	return d
}

// Stop closes the listener and every connection, as a crashing driver would.
func (d *FakeCSIDriver) Stop() {
	if d.server != nil {
		d.server.Stop()
	}
}

// ProbeCount returns how many Probe calls the driver answered.
func (d *FakeCSIDriver) ProbeCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.Probes
}

func (d *FakeCSIDriver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return &csi.GetPluginInfoResponse{Name: d.Name, VendorVersion: "test"}, nil
}

func (d *FakeCSIDriver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Probes++
	if d.ProbeErr != nil {
		return nil, d.ProbeErr
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(d.Probes > d.NotReadyProbes)}, nil
}

func (d *FakeCSIDriver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	services := each(d.PluginServices, func(s csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: s}}}
	})
	expansion := each(d.PluginExpansion, func(e csi.PluginCapability_VolumeExpansion_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: e}}}
	})
	return &csi.GetPluginCapabilitiesResponse{Capabilities: append(services, expansion...)}, nil
}

func (d *FakeCSIDriver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: each(d.ControllerCaps, func(c csi.ControllerServiceCapability_RPC_Type) *csi.ControllerServiceCapability {
		return &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: c}}}
	})}, nil
}

func (d *FakeCSIDriver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return &csi.NodeGetCapabilitiesResponse{Capabilities: each(d.NodeCaps, func(c csi.NodeServiceCapability_RPC_Type) *csi.NodeServiceCapability {
		return &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: c}}}
	})}, nil
}

func (d *FakeCSIDriver) GroupControllerGetCapabilities(context.Context, *csi.GroupControllerGetCapabilitiesRequest) (*csi.GroupControllerGetCapabilitiesResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return &csi.GroupControllerGetCapabilitiesResponse{Capabilities: each(d.GroupControllerCaps, func(c csi.GroupControllerServiceCapability_RPC_Type) *csi.GroupControllerServiceCapability {
		return &csi.GroupControllerServiceCapability{Type: &csi.GroupControllerServiceCapability_Rpc{Rpc: &csi.GroupControllerServiceCapability_RPC{Type: c}}}
	})}, nil
}

// each is the capability wrap makes of each type listed, in order: what every GetCapabilities call answers.
func each[T, C any](types []T, wrap func(T) C) []C {
	var out []C
	for _, t := range types {
		out = append(out, wrap(t))
	}
	return out
}
