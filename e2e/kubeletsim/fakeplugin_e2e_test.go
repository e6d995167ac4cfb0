//go:build e2e

package kubeletsim_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

const (
	fakeDriver = "fake.kubeletsim.stowage.io"
	fakeNodeID = "fake-node-1"
	fakeZone   = "zone-1"
	fakeTopKey = "topology.fake.kubeletsim.stowage.io/zone"
)

// fakePlugin is a CSI node plugin that records every request and does real bind mounts: staging mounts a
// per-volume directory at the staging path, publishing bind-mounts the staging path (or, for inline
// volumes, a per-volume directory) at the target. So the kubelet's calls are visible and its mounts real.
type fakePlugin struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	dataDir string
	socket  string
	srv     *grpc.Server

	mu    sync.Mutex
	calls []recorded
}

type recorded struct {
	method string
	req    proto.Message
}

func startFakePlugin(t *testing.T) *fakePlugin {
	t.Helper()
	dir, err := os.MkdirTemp("", "kubeletsim-plugin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := &fakePlugin{dataDir: filepath.Join(dir, "data"), socket: filepath.Join(dir, "csi.sock")}
	ln, err := net.Listen("unix", p.socket)
	if err != nil {
		t.Fatal(err)
	}
	p.srv = grpc.NewServer()
	csi.RegisterIdentityServer(p.srv, p)
	csi.RegisterNodeServer(p.srv, p)
	go func() { _ = p.srv.Serve(ln) }()
	t.Cleanup(p.srv.Stop)
	return p
}

func (p *fakePlugin) record(method string, req proto.Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, recorded{method, proto.Clone(req)})
}

// requests returns the recorded requests of one method.
func (p *fakePlugin) requests(method string) []proto.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []proto.Message
	for _, c := range p.calls {
		if c.method == method {
			out = append(out, c.req)
		}
	}
	return out
}

func (p *fakePlugin) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: fakeDriver, VendorVersion: "test"}, nil
}

func (p *fakePlugin) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

func (p *fakePlugin) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (p *fakePlugin) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: fakeNodeID, MaxVolumesPerNode: 5,
		AccessibleTopology: &csi.Topology{Segments: map[string]string{fakeTopKey: fakeZone}}}, nil
}

func (p *fakePlugin) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, c := range []csi.NodeServiceCapability_RPC_Type{csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME, csi.NodeServiceCapability_RPC_EXPAND_VOLUME} {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: c}}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (p *fakePlugin) volumeDir(id string) (string, error) {
	dir := filepath.Join(p.dataDir, id)
	return dir, os.MkdirAll(dir, 0o755)
}

func (p *fakePlugin) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	p.record("NodeStageVolume", req)
	src, err := p.volumeDir(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := unix.Mount(src, req.GetStagingTargetPath(), "", unix.MS_BIND, ""); err != nil {
		return nil, err
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func (p *fakePlugin) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	p.record("NodeUnstageVolume", req)
	if err := unix.Unmount(req.GetStagingTargetPath(), 0); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return nil, err
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (p *fakePlugin) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	p.record("NodePublishVolume", req)
	src := req.GetStagingTargetPath()
	if src == "" {
		var err error
		if src, err = p.volumeDir(req.GetVolumeId()); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(req.GetTargetPath(), 0o750); err != nil {
		return nil, err
	}
	if err := unix.Mount(src, req.GetTargetPath(), "", unix.MS_BIND, ""); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (p *fakePlugin) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	p.record("NodeUnpublishVolume", req)
	if err := unix.Unmount(req.GetTargetPath(), 0); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return nil, err
	}
	if err := os.Remove(req.GetTargetPath()); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

func (p *fakePlugin) NodeExpandVolume(_ context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	p.record("NodeExpandVolume", req)
	return &csi.NodeExpandVolumeResponse{CapacityBytes: req.GetCapacityRange().GetRequiredBytes()}, nil
}
