// Package csiconn connects a sidecar to its CSI driver's socket and discovers what the driver is: it waits
// for Probe to report ready, reads the driver name and the plugin, controller and node capabilities. Every
// call made through the connection is recorded in csi_sidecar_operations_seconds and bounded by --timeout.
package csiconn

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-lib-utils/connection"
	csimetrics "github.com/kubernetes-csi/csi-lib-utils/metrics"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// ProbeInterval is the pause between two Probe calls while the driver is not ready (upstream's value).
const ProbeInterval = time.Second

// Options configure Connect.
type Options struct {
	// Address is --csi-address: a socket path or a unix:// URL.
	Address string
	// Timeout bounds each call made through the helpers here and WithTimeout (--timeout).
	Timeout time.Duration
	// Metrics records every call as csi_sidecar_operations_seconds; nil records nothing.
	Metrics csimetrics.CSIMetricsManager
	// OnConnectionLoss decides what happens when the driver's socket goes away. Nil means upstream's
	// behaviour: write /dev/termination-log and exit 1, so the kubelet restarts the container and the sidecar
	// re-discovers a possibly upgraded driver. Tests replace it.
	OnConnectionLoss func(context.Context) bool
}

// Conn is a connection to a CSI driver.
type Conn struct {
	conn    *grpc.ClientConn
	timeout time.Duration
	// onLoss is Options.OnConnectionLoss or its default; following counts the FollowRestarts calls running,
	// during which a lost connection is redialled instead (restart.go).
	onLoss    func(context.Context) bool
	following atomic.Int32
	// redials counts the connections lost and redialled while following: FollowRestarts compares it across
	// a stretch where it did not watch the state (its own first calls), as a restart can fall there whole.
	redials atomic.Uint64
	// learnt is the driver as the sidecar first learnt it, which a restarted driver must still be.
	learnt learntIdentity
}

// Connect dials the driver, waiting up to 30 s for its socket (csi-lib-utils' connection.Connect).
func Connect(ctx context.Context, o Options) (*Conn, error) {
	if o.Timeout <= 0 {
		return nil, fmt.Errorf("CSI call timeout must be positive, got %s", o.Timeout)
	}
	onLoss := o.OnConnectionLoss
	if onLoss == nil {
		onLoss = connection.ExitOnConnectionLoss()
	}
	c := &Conn{timeout: o.Timeout, onLoss: onLoss}
	conn, err := connection.Connect(ctx, o.Address, o.Metrics, connection.OnConnectionLoss(c.lost))
	if err != nil {
		return nil, fmt.Errorf("connecting to CSI driver at %q: %w", o.Address, err)
	}
	c.conn = conn
	return c, nil
}

// GRPC returns the underlying connection, for creating csi.ControllerClient and friends.
func (c *Conn) GRPC() *grpc.ClientConn { return c.conn }

// Close closes the connection.
func (c *Conn) Close() error { return c.conn.Close() }

// Timeout is the per-call timeout.
func (c *Conn) Timeout() time.Duration { return c.timeout }

// WithTimeout returns ctx bounded by the per-call timeout.
func (c *Conn) WithTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// ProbeUntilReady calls Probe every ProbeInterval until the driver says it is ready. Not-ready answers,
// timeouts and Unavailable (the driver is still starting) are retried until ctx ends; any other error is
// returned, since a driver that fails Probe otherwise will not get better by waiting.
func (c *Conn) ProbeUntilReady(ctx context.Context) error {
	_, err := c.probeUntilReady(ctx)
	return err
}

// probeUntilReady is ProbeUntilReady that also tells whether the driver was not ready or away at first.
func (c *Conn) probeUntilReady(ctx context.Context) (waited bool, err error) {
	logger := klog.FromContext(ctx)
	ticker := time.NewTicker(ProbeInterval)
	defer ticker.Stop()
	for {
		ready, err := c.probe(ctx)
		switch {
		case err == nil && ready:
			return waited, nil
		case err == nil:
			logger.Info("CSI driver is not ready yet")
		case isRetriableProbeError(err):
			logger.Info("CSI driver probe failed, retrying", "err", err)
		default:
			return waited, fmt.Errorf("CSI driver probe failed: %w", err)
		}
		waited = true
		select {
		case <-ctx.Done():
			return waited, fmt.Errorf("waiting for the CSI driver to become ready: %w", ctx.Err())
		case <-ticker.C:
		}
	}
}

func (c *Conn) probe(ctx context.Context) (bool, error) {
	ctx, cancel := c.WithTimeout(ctx)
	defer cancel()
	rsp, err := csi.NewIdentityClient(c.conn).Probe(ctx, &csi.ProbeRequest{})
	if err != nil {
		return false, err
	}
	// The spec says an absent "ready" means ready.
	if rsp.GetReady() == nil {
		return true, nil
	}
	return rsp.GetReady().GetValue(), nil
}

func isRetriableProbeError(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable:
		return true
	}
	return false
}

// DriverName returns the name from GetPluginInfo; an empty name is an error.
func (c *Conn) DriverName(ctx context.Context) (string, error) {
	ctx, cancel := c.WithTimeout(ctx)
	defer cancel()
	rsp, err := csi.NewIdentityClient(c.conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		return "", fmt.Errorf("GetPluginInfo: %w", err)
	}
	if rsp.GetName() == "" {
		return "", errors.New("GetPluginInfo: the driver returned an empty name")
	}
	c.learnt.record(func(id *driverIdentity) { id.name = rsp.GetName() })
	return rsp.GetName(), nil
}
