package liveness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	csimetrics "github.com/kubernetes-csi/csi-lib-utils/metrics"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/httpserver"
	"github.com/stowage-csi/stowage/shared/metrics"
)

// nameRetryInterval is the pause between two GetPluginInfo calls while the driver is up but not answering
// yet.
const nameRetryInterval = time.Second

// Prober serves /healthz (and metrics) and answers each request with a Probe call to the driver.
type Prober struct {
	cfg        Config
	registry   *metrics.Registry
	csiMetrics csimetrics.CSIMetricsManager
	// health serves /healthz, and the metrics with --http-endpoint; metricsOnly serves the metrics alone at the
	// deprecated --metrics-address.
	health      *httpserver.Server
	metricsOnly *httpserver.Server

	mu     sync.Mutex
	conn   *csiconn.Conn
	driver string
}

// Run serves until ctx ends; it fails only if an address cannot be bound or the driver cannot name itself.
func Run(ctx context.Context, cfg Config) error {
	p, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	return p.Serve(ctx)
}

// New binds the HTTP endpoints at once, so a port conflict fails start-up. Serve must follow.
func New(ctx context.Context, cfg Config) (*Prober, error) {
	p := &Prober{cfg: cfg, registry: metrics.NewRegistry()}
	// The registry has its own process collector, hence no second process_start_time_seconds here.
	p.csiMetrics = csimetrics.NewCSIMetricsManagerWithOptions("",
		csimetrics.WithCustomRegistry(p.registry.Kube()), csimetrics.WithProcessStartTime(false))
	var err error
	if p.health, err = httpserver.Listen(cfg.HealthAddress()); err != nil {
		return nil, err
	}
	p.health.HandleCheck("/healthz", func(r *http.Request) error { return p.check(r.Context()) })
	switch {
	case cfg.MetricsAddress != "":
		if p.metricsOnly, err = httpserver.Listen(cfg.MetricsAddress); err != nil {
			return nil, err
		}
		p.metricsOnly.Handle(cfg.MetricsPath, p.registry.Handler())
	case cfg.HTTPEndpoint != "":
		p.health.Handle(cfg.MetricsPath, p.registry.Handler())
	}
	return p, nil
}

// HealthServer is the server of /healthz.
func (p *Prober) HealthServer() *httpserver.Server { return p.health }

// Serve answers HTTP requests until ctx ends. Meanwhile it connects to the driver, waiting as long as it
// takes (a driver that starts slowly or crash-loops must not make its probe crash-loop too), and keeps the
// connection across the driver's restarts: gRPC redials the socket when the driver replaces it.
func (p *Prober) Serve(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	serveCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 3)
	var running sync.WaitGroup
	for _, s := range []*httpserver.Server{p.health, p.metricsOnly} {
		if s != nil {
			running.Go(func() {
				if err := s.Serve(serveCtx); err != nil {
					errc <- err
				}
			})
		}
	}
	running.Go(func() {
		if err := p.connect(serveCtx); err != nil {
			errc <- err
		}
	})
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	stop()
	running.Wait()
	if conn, _ := p.current(); conn != nil {
		if cerr := conn.Close(); cerr != nil {
			logger.Error(cerr, "Closing the CSI connection")
		}
	}
	return err
}

// connect dials the driver until it answers and learns its name. It returns nil once connected or when ctx
// ends, and an error only for a driver that answers GetPluginInfo with something other than "not yet".
func (p *Prober) connect(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("csiAddress", p.cfg.CSIAddress)
	var conn *csiconn.Conn
	for conn == nil {
		var err error
		conn, err = csiconn.Connect(ctx, csiconn.Options{
			Address: p.cfg.CSIAddress,
			Timeout: p.cfg.ProbeTimeout,
			Metrics: p.csiMetrics,
			// A probe outlives its driver's restarts: redial, and let /healthz say what it sees meanwhile.
			OnConnectionLoss: func(ctx context.Context) bool {
				klog.FromContext(ctx).Info("Lost the connection to the CSI driver, reconnecting", "csiAddress", p.cfg.CSIAddress)
				return true
			},
		})
		if ctx.Err() != nil {
			if conn != nil {
				_ = conn.Close()
			}
			return nil
		}
		if err != nil {
			logger.Info("CSI driver not reachable yet, still trying", "err", err)
		}
	}
	for {
		name, err := conn.DriverName(ctx)
		if err == nil {
			logger.Info("CSI driver name", "driver", name)
			p.csiMetrics.SetDriverName(name)
			p.mu.Lock()
			p.conn, p.driver = conn, name
			p.mu.Unlock()
			return nil
		}
		if ctx.Err() != nil {
			_ = conn.Close()
			return nil
		}
		if !retriable(err) {
			_ = conn.Close()
			return fmt.Errorf("learning the CSI driver's name at %s: %w", p.cfg.CSIAddress, err)
		}
		logger.Info("CSI driver does not answer GetPluginInfo yet, retrying", "err", err)
		select {
		case <-ctx.Done():
			_ = conn.Close()
			return nil
		case <-time.After(nameRetryInterval):
		}
	}
}

// retriable tells a driver that is not answering yet from one that answered with an error.
func retriable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

func (p *Prober) current() (*csiconn.Conn, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conn, p.driver
}

// check calls Probe within --probe-timeout. It waits for the connection to be ready within that time rather
// than failing at once while gRPC redials a restarted driver, as upstream's probe, which dials anew each time,
// waits for the socket.
func (p *Prober) check(ctx context.Context) error {
	conn, driver := p.current()
	if conn == nil {
		return fmt.Errorf("not connected to the CSI driver at %s yet", p.cfg.CSIAddress)
	}
	logger := klog.FromContext(ctx).WithValues("driver", driver)
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ProbeTimeout)
	defer cancel()
	logger.V(5).Info("Sending probe request to CSI driver")
	rsp, err := csi.NewIdentityClient(conn.GRPC()).Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
	if err != nil {
		err = fmt.Errorf("CSI driver %s at %s: Probe failed (connection %s): %w", driver, p.cfg.CSIAddress,
			conn.GRPC().GetState(), err)
		logger.Error(err, "Health check failed")
		return err
	}
	// The CSI spec reads an absent "ready" as ready.
	if r := rsp.GetReady(); r != nil && !r.GetValue() {
		err := fmt.Errorf("CSI driver %s responded but is not ready", driver)
		logger.Error(err, "Health check failed")
		return err
	}
	logger.V(5).Info("Health check succeeded")
	return nil
}
