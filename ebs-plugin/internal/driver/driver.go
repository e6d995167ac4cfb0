// Package driver implements the CSI services of ebs.csi.aws.com: identity, controller and node. It turns CSI
// requests into calls on a Cloud (EC2) and a node Mounter, and owns the CSI-level rules: validation, error
// codes, idempotency and concurrency.
package driver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/cloud"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/coalescer"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/inflight"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/limits"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/metadata"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/modifyrpc"
	"github.com/stowage-csi/stowage/shared/csiserver"
)

// DriverName is the CSI driver name; PVs and CSIDriver objects carry it, so it never changes.
const DriverName = "ebs.csi.aws.com"

// Topology keys.
const (
	ZoneTopologyKey          = "topology.ebs.csi.aws.com/zone"
	WellKnownZoneTopologyKey = "topology.kubernetes.io/zone"
	ZoneIDTopologyKey        = "topology.k8s.aws/zone-id"
	OSTopologyKey            = "kubernetes.io/os"
)

// Mode selects the services to run.
type Mode string

// Modes.
const (
	ModeAll        Mode = "all"
	ModeController Mode = "controller"
	ModeNode       Mode = "node"
)

// Options are the driver's settings, filled from flags.
type Options struct {
	Mode                      Mode
	Endpoint                  string
	Version                   string
	ExtraTags                 map[string]string
	KubernetesClusterID       string
	WarnOnInvalidTag          bool
	ModifyVolumeWindow        time.Duration
	VolumeAttachLimit         int64
	ReservedVolumeAttachments int
	// Clock times the modification window; nil means the real clock.
	Clock clock.WithDelayedExecution
}

// Cloud is the EC2 work the controller needs.
type Cloud interface {
	CreateDisk(ctx context.Context, name string, opts cloud.DiskOptions) (*cloud.Disk, error)
	DeleteDisk(ctx context.Context, volumeID string) error
	GetDisk(ctx context.Context, volumeID string) (*cloud.Disk, error)
	AttachDisk(ctx context.Context, volumeID, instanceID string) (string, error)
	DetachDisk(ctx context.Context, volumeID, instanceID string) error
	WaitInitialized(ctx context.Context, volumeID string) error
	ModifyDisk(ctx context.Context, volumeID string, opts cloud.ModifyOptions) (int32, error)
	CreateSnapshot(ctx context.Context, name, volumeID string, opts cloud.SnapshotOptions) (*cloud.Snapshot, error)
	DeleteSnapshot(ctx context.Context, id string) error
	GetSnapshotByName(ctx context.Context, name string) (*cloud.Snapshot, error)
	GetSnapshotByID(ctx context.Context, id string) (*cloud.Snapshot, error)
	ListSnapshots(ctx context.Context, volumeID string, maxEntries int, token string) ([]*cloud.Snapshot, string, error)
	AvailabilityZones(ctx context.Context) ([]string, error)
}

// MetadataSource tells the node which instance it is.
type MetadataSource interface {
	Get(ctx context.Context) (*metadata.Instance, error)
}

// Driver serves the CSI services.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer

	opts     Options
	cloud    Cloud
	mounter  Mounter
	metadata MetadataSource

	inFlight *inflight.Set
	// attachLimits is EC2's per-type attachment table, parsed once here and read-only after.
	attachLimits *limits.Table
	modifier     *coalescer.Coalescer[string, modifyRequest, int32]

	publishMu    sync.Mutex
	publishes    map[string]*publishOp // volumeID/nodeID -> running ControllerPublish
	unpublishing map[string]bool       // volumeID/nodeID -> ControllerUnpublish detaching

	instMu   sync.Mutex
	instance *metadata.Instance
}

// New returns a Driver. cloudAPI is nil in node mode; mounter and meta are nil in controller mode.
func New(opts Options, cloudAPI Cloud, mounter Mounter, meta MetadataSource) (*Driver, error) {
	switch opts.Mode {
	case ModeAll, ModeController, ModeNode:
	default:
		return nil, fmt.Errorf("unknown mode %q (want all, controller or node)", opts.Mode)
	}
	if opts.Mode != ModeNode && cloudAPI == nil {
		return nil, fmt.Errorf("mode %s needs the EC2 client", opts.Mode)
	}
	if opts.Mode != ModeController && (mounter == nil || meta == nil) {
		return nil, fmt.Errorf("mode %s needs a mounter and a metadata source", opts.Mode)
	}
	if opts.ModifyVolumeWindow <= 0 {
		opts.ModifyVolumeWindow = 2 * time.Second
	}
	attachLimits, err := limits.Load()
	if err != nil {
		return nil, err
	}
	d := &Driver{
		attachLimits: attachLimits,
		opts:         opts,
		cloud:        cloudAPI,
		mounter:      mounter,
		metadata:     meta,
		inFlight:     inflight.New(),
		publishes:    map[string]*publishOp{},
		unpublishing: map[string]bool{},
	}
	// 15 s bounds one merged modification, as upstream: the resizer retries, and a shorter execution keeps
	// the window of the next request predictable.
	d.modifier = coalescer.New(coalescer.Config{Window: opts.ModifyVolumeWindow, Timeout: 15 * time.Second, Clock: opts.Clock},
		mergeModify, d.executeModify)
	return d, nil
}

func (d *Driver) controllerEnabled() bool { return d.opts.Mode != ModeNode }
func (d *Driver) nodeEnabled() bool       { return d.opts.Mode != ModeController }

// Run serves the CSI gRPC services on the endpoint until ctx ends. Requests are logged at V(4), those with
// secrets by type only.
func (d *Driver) Run(ctx context.Context) error {
	klog.FromContext(ctx).Info("Serving CSI", "endpoint", d.opts.Endpoint, "mode", d.opts.Mode, "driver", DriverName, "version", d.opts.Version)
	return csiserver.Serve(ctx, "--endpoint", d.opts.Endpoint, func(srv *grpc.Server) error {
		csi.RegisterIdentityServer(srv, d)
		if d.controllerEnabled() {
			csi.RegisterControllerServer(srv, d)
			// As upstream in controller and all modes: volume-modifier-for-k8s calls it on this socket.
			if err := modifyrpc.Register(srv, d); err != nil {
				return err
			}
		}
		if d.nodeEnabled() {
			csi.RegisterNodeServer(srv, d)
		}
		return nil
	}, csiserver.LogRequestBodies())
}
