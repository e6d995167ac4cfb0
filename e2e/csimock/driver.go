// Package csimock is a CSI driver for end-to-end tests of the sidecars: it serves the Identity, Controller
// and Node (NodeGetInfo only) services on a real unix socket, keeps its volumes in memory, and lets a test
// inject errors or block any call through one hook. It is instant by default, so benchmarks measure the
// sidecar and the API server, not the driver.
//
//	drv, err := csimock.Start(ctx, csimock.Options{Name: "mock.csi.stowage.io"})
//	defer drv.Stop()
//	drv.SetBeforeCall(func(ctx context.Context, method string, req any) error {
//		if method == csimock.CreateVolume { <-release }
//		return nil
//	})
//	... run a sidecar with --csi-address=drv.Endpoint() ...
//	drv.Volumes() // what the driver holds, to assert nothing leaked
package csimock

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Method names as passed to the BeforeCall hook and Calls: the full gRPC method path.
const (
	CreateVolume              = "/csi.v1.Controller/CreateVolume"
	DeleteVolume              = "/csi.v1.Controller/DeleteVolume"
	ControllerPublishVolume   = "/csi.v1.Controller/ControllerPublishVolume"
	ControllerUnpublishVolume = "/csi.v1.Controller/ControllerUnpublishVolume"
	ListVolumes               = "/csi.v1.Controller/ListVolumes"
	GetCapacity               = "/csi.v1.Controller/GetCapacity"
	ControllerExpandVolume    = "/csi.v1.Controller/ControllerExpandVolume"
	CreateSnapshot            = "/csi.v1.Controller/CreateSnapshot"
	DeleteSnapshot            = "/csi.v1.Controller/DeleteSnapshot"
)

// DefaultControllerCaps is what a typical block driver advertises.
var defaultControllerCaps = []csi.ControllerServiceCapability_RPC_Type{
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
	csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
	csi.ControllerServiceCapability_RPC_GET_CAPACITY,
	csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
	csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
}

// Options configure a mock driver. The zero value is a usable driver named mock.csi.stowage.io.
type Options struct {
	// Name is the driver name returned by GetPluginInfo.
	Name string
	// SocketDir holds csi.sock; a short temporary directory is made when empty (unix socket paths are
	// limited to 107 bytes, which t.TempDir() paths can exceed).
	SocketDir string
	// ControllerCaps replaces the default controller capabilities when not nil. An empty, non-nil slice
	// advertises none (a driver without ControllerPublish, for the attacher's trivial handler).
	ControllerCaps []csi.ControllerServiceCapability_RPC_Type
	// NoControllerService leaves CONTROLLER_SERVICE out of the plugin capabilities.
	NoControllerService bool
	// TopologyKey, when set, makes the driver advertise VOLUME_ACCESSIBILITY_CONSTRAINTS: new volumes are
	// accessible from the first preferred (else requisite) segment's value of this key, and NodeGetInfo
	// reports NodeID in segment {TopologyKey: NodeZone}.
	TopologyKey string
	// NodeID and NodeZone are what NodeGetInfo answers.
	NodeID, NodeZone string
	// Capacity is GetCapacity's available_capacity in bytes (0 means 100 GiB).
	Capacity int64
	// GroupSnapshots serves the GroupController service (groupsnapshots.go) and advertises it with
	// GROUP_CONTROLLER_SERVICE and CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT.
	GroupSnapshots bool
}

// Volume is one volume the driver holds.
type Volume struct {
	ID            string
	Name          string
	CapacityBytes int64
	Parameters    map[string]string
	Topology      map[string]string
	ContentSource string
	// PublishedNodes are the node IDs the volume is published to, sorted.
	PublishedNodes []string
}

// BeforeCallFunc runs before every call with the full method name and the request. A non-nil error is
// returned to the caller instead of running the call; the function may block (honour ctx to stop blocking
// when the caller gives up).
type BeforeCallFunc func(ctx context.Context, method string, req any) error

// Driver is a running mock CSI driver.
type Driver struct {
	opts    Options
	socket  string
	ownDir  bool
	server  *grpc.Server
	done    chan struct{}
	mu      sync.Mutex
	volumes map[string]*Volume // by ID
	byName  map[string]string  // name -> ID
	// snapshots by ID, and their IDs by name.
	snapshots      map[string]*Snapshot
	snapshotByName map[string]string
	// groups are the group snapshots by ID, and their IDs by name (groupsnapshots.go).
	groups      map[string]*GroupSnapshot
	groupByName map[string]string
	nextID      int
	calls       map[string]int
	volumeCalls map[methodVolume]int
	before      BeforeCallFunc
	stopOnce    sync.Once
}

// Start listens on <SocketDir>/csi.sock and serves until Stop or ctx is done.
func Start(ctx context.Context, opts Options) (*Driver, error) {
	if opts.Name == "" {
		opts.Name = "mock.csi.stowage.io"
	}
	if opts.ControllerCaps == nil {
		opts.ControllerCaps = defaultControllerCaps
	}
	if opts.Capacity == 0 {
		opts.Capacity = 100 << 30
	}
	d := &Driver{
		opts:    opts,
		done:    make(chan struct{}),
		volumes: map[string]*Volume{},
		byName:  map[string]string{},

		snapshots:      map[string]*Snapshot{},
		snapshotByName: map[string]string{},
		groups:         map[string]*GroupSnapshot{},
		groupByName:    map[string]string{},
		calls:          map[string]int{},
		volumeCalls:    map[methodVolume]int{},
	}
	dir := opts.SocketDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "csimock"); err != nil {
			return nil, err
		}
		d.ownDir = true
	}
	d.socket = filepath.Join(dir, "csi.sock")
	_ = os.Remove(d.socket)
	lis, err := net.Listen("unix", d.socket)
	if err != nil {
		if d.ownDir {
			_ = os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("csimock: listen on %s: %w", d.socket, err)
	}
	d.server = grpc.NewServer(grpc.UnaryInterceptor(d.intercept))
	if opts.GroupSnapshots {
		csi.RegisterIdentityServer(d.server, groupIdentity{identity{d: d}})
		csi.RegisterGroupControllerServer(d.server, groupController{d: d})
	} else {
		csi.RegisterIdentityServer(d.server, identity{d: d})
	}
	csi.RegisterControllerServer(d.server, controller{d: d})
	csi.RegisterNodeServer(d.server, node{d: d})
	go func() {
		defer close(d.done)
		_ = d.server.Serve(lis)
	}()
	go func() {
		select {
		case <-ctx.Done():
			d.Stop()
		case <-d.done:
		}
	}()
	return d, nil
}

// Endpoint is the address for a sidecar's --csi-address.
func (d *Driver) Endpoint() string { return "unix://" + d.socket }

// Socket is the path of the unix socket.
func (d *Driver) Socket() string { return d.socket }

// Name is the driver name.
func (d *Driver) Name() string { return d.opts.Name }

// Stop closes the socket at once, failing calls in flight, and removes its own directory.
func (d *Driver) Stop() {
	d.stopOnce.Do(func() {
		d.server.Stop()
		<-d.done
		if d.ownDir {
			_ = os.RemoveAll(filepath.Dir(d.socket))
		}
	})
}

// SetBeforeCall installs (or, with nil, removes) the hook run before every call.
func (d *Driver) SetBeforeCall(f BeforeCallFunc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.before = f
}

// Calls is how many calls of the full method name reached the driver, including failed ones.
func (d *Driver) Calls(method string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[method]
}

// CallsFor is how many calls of the full method name for the volume with ID volumeID reached the driver,
// including failed ones: a test with several volumes counts the calls for the one it checks.
func (d *Driver) CallsFor(method, volumeID string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.volumeCalls[methodVolume{method, volumeID}]
}

// methodVolume keys the calls of one method for one volume.
type methodVolume struct{ method, volumeID string }

// Volumes returns a copy of every volume the driver holds, sorted by name.
func (d *Driver) Volumes() []Volume {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Volume, 0, len(d.volumes))
	for _, v := range d.volumes {
		out = append(out, v.copy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SetCapacity changes GetCapacity's answer, as a volume made or deleted outside the test's view would.
func (d *Driver) SetCapacity(bytes int64) {
	d.mu.Lock()
	d.opts.Capacity = bytes
	d.mu.Unlock()
}

// AddVolume puts a volume into the driver as if it had been created earlier (a pre-provisioned PV's
// volume) and returns it.
func (d *Driver) AddVolume(name string, capacity int64) Volume {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.createLocked(name, capacity, nil, nil, "").copy()
}

func (d *Driver) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	d.mu.Lock()
	d.calls[info.FullMethod]++
	if r, ok := req.(interface{ GetVolumeId() string }); ok {
		d.volumeCalls[methodVolume{info.FullMethod, r.GetVolumeId()}]++
	}
	before := d.before
	d.mu.Unlock()
	if before != nil {
		if err := before(ctx, info.FullMethod, req); err != nil {
			return nil, err
		}
	}
	return handler(ctx, req)
}

func (d *Driver) createLocked(name string, capacity int64, params, topology map[string]string, source string) *Volume {
	d.nextID++
	v := &Volume{
		ID:            "vol-" + strconv.Itoa(d.nextID),
		Name:          name,
		CapacityBytes: capacity,
		Parameters:    params,
		Topology:      topology,
		ContentSource: source,
	}
	d.volumes[v.ID] = v
	d.byName[name] = v.ID
	return v
}

func (v *Volume) copy() Volume {
	c := *v
	c.PublishedNodes = append([]string(nil), v.PublishedNodes...)
	return c
}

func (v *Volume) csi() *csi.Volume {
	out := &csi.Volume{VolumeId: v.ID, CapacityBytes: v.CapacityBytes, VolumeContext: map[string]string{"name": v.Name}}
	if v.Topology != nil {
		out.AccessibleTopology = []*csi.Topology{{Segments: v.Topology}}
	}
	return out
}

func (d *Driver) hasControllerCap(c csi.ControllerServiceCapability_RPC_Type) bool {
	for _, have := range d.opts.ControllerCaps {
		if have == c {
			return true
		}
	}
	return false
}

func (d *Driver) requireCap(c csi.ControllerServiceCapability_RPC_Type) error {
	if !d.hasControllerCap(c) {
		return status.Errorf(codes.Unimplemented, "capability %s is not advertised", c)
	}
	return nil
}
