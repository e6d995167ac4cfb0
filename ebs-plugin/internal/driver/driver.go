// Package driver implements the CSI services of ebs.csi.aws.com: identity, controller and node. It turns CSI
// requests into calls on a Cloud (EC2) and a node Mounter, and owns the CSI-level rules: validation, error
// codes, idempotency and concurrency.
package driver

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
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

// Run serves the CSI gRPC services on the endpoint until ctx ends.
func (d *Driver) Run(ctx context.Context) error {
	network, addr, err := parseEndpoint(d.opts.Endpoint)
	if err != nil {
		return err
	}
	if network == "unix" {
		if err := os.MkdirAll(filepath.Dir(addr), 0o755); err != nil {
			return fmt.Errorf("create socket directory: %w", err)
		}
		if err := os.Remove(addr); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("remove stale socket %s: %w", addr, err)
		}
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", d.opts.Endpoint, err)
	}
	logger := klog.FromContext(ctx)
	srv := grpc.NewServer(grpc.UnaryInterceptor(logInterceptor(logger)))
	csi.RegisterIdentityServer(srv, d)
	if d.controllerEnabled() {
		csi.RegisterControllerServer(srv, d)
		// As upstream in controller and all modes: volume-modifier-for-k8s calls it on this socket.
		if err := modifyrpc.Register(srv, d); err != nil {
			_ = ln.Close()
			return err
		}
	}
	if d.nodeEnabled() {
		csi.RegisterNodeServer(srv, d)
	}
	logger.Info("Serving CSI", "endpoint", d.opts.Endpoint, "mode", d.opts.Mode, "driver", DriverName, "version", d.opts.Version)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve CSI: %w", err)
	case <-ctx.Done():
	}
	// Serve returns as soon as the stop begins; GracefulStop returns once running calls have finished, so
	// nothing of the server outlives Run.
	srv.GracefulStop()
	if err := <-served; err != nil {
		return fmt.Errorf("serve CSI: %w", err)
	}
	return nil
}

func parseEndpoint(ep string) (string, string, error) {
	u, err := url.Parse(ep)
	if err != nil {
		return "", "", fmt.Errorf("--endpoint %q: %w", ep, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "unix":
		addr := u.Path
		if u.Host != "" {
			addr = u.Host + u.Path // unix://tmp/csi.sock, upstream's default, is relative to /
			addr = "/" + addr
		}
		if addr == "" {
			return "", "", fmt.Errorf("--endpoint %q: no socket path", ep)
		}
		return "unix", addr, nil
	case "tcp":
		return "tcp", u.Host, nil
	}
	return "", "", fmt.Errorf("--endpoint %q: scheme must be unix or tcp", ep)
}

func logInterceptor(logger klog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		l := logger.WithValues("method", info.FullMethod)
		ctx = klog.NewContext(ctx, l)
		l.V(4).Info("CSI request", "request", stripSecrets(req))
		resp, err := handler(ctx, req)
		if err != nil {
			l.V(2).Info("CSI request failed", "err", err.Error())
		} else {
			l.V(4).Info("CSI response", "response", resp)
		}
		return resp, err
	}
}

// stripSecrets keeps secrets out of logs: only the type of requests that carry secrets is logged.
func stripSecrets(req any) any {
	type secretHolder interface{ GetSecrets() map[string]string }
	if s, ok := req.(secretHolder); ok && len(s.GetSecrets()) > 0 {
		return fmt.Sprintf("%T (secrets omitted)", req)
	}
	return req
}
