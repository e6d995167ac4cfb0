package registrar

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/httpserver"
)

// stopTimeout bounds the graceful stop of the registration server: the kubelet's calls are short, and a stuck
// one must not hold up the pod's termination.
const stopTimeout = 5 * time.Second

// Registrar is a registration socket being served, and the diagnostics endpoint if one is configured.
type Registrar struct {
	cfg     Config
	driver  string
	socket  string
	service *service

	listener net.Listener
	// created identifies the socket this registrar made, so that on exit it removes that one only and never
	// a socket another registrar has put at the same path since.
	created os.FileInfo
	grpc    *grpc.Server
	http    *httpserver.Server
	// served is set once Serve runs; Close releases the HTTP endpoint itself only if it never did.
	served bool
}

// Run registers the driver with the kubelet and serves until ctx ends (nil: a graceful stop, with the
// registration socket removed) or the kubelet reports a failed registration (an error, so that the container
// restarts). In --mode=kubelet-registration-probe it checks the registration instead and returns.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Probing() {
		return Probe(ctx, cfg)
	}
	r, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	return r.Serve(ctx)
}

// New asks the driver at --csi-address for its name, creates its registration socket (replacing a stale
// one) and binds the diagnostics endpoint. Serve must follow, or Close.
func New(ctx context.Context, cfg Config) (*Registrar, error) {
	logger := klog.FromContext(ctx)
	logger.Info("Running node-driver-registrar", "mode", cfg.Mode)
	if cfg.ConnectionTimeout != 0 {
		logger.Info("Warning: --connection-timeout is deprecated and has no effect")
	}
	driver, err := driverName(ctx, cfg)
	if err != nil {
		return nil, err
	}
	logger.Info("CSI driver name", "driver", driver)
	r := &Registrar{
		cfg:     cfg,
		driver:  driver,
		socket:  cfg.SocketPath(driver),
		service: newService(driver, cfg.KubeletRegistrationPath),
	}
	if r.listener, err = listen(r.socket); err != nil {
		return nil, err
	}
	// Go would unlink the path on Close whatever is there by then; Close removes it only if it is still ours.
	r.listener.(*net.UnixListener).SetUnlinkOnClose(false)
	if r.created, err = os.Lstat(r.socket); err != nil {
		_ = r.listener.Close()
		return nil, fmt.Errorf("reading back the registration socket %s: %w", r.socket, err)
	}
	if addr := cfg.Endpoint(); addr != "" {
		if r.http, err = httpserver.Listen(addr); err != nil {
			r.Close(ctx)
			return nil, err
		}
		r.http.Handle("/healthz", http.HandlerFunc(r.healthz))
		if cfg.EnablePprof {
			r.http.Handle("/debug/pprof/", http.HandlerFunc(pprof.Index))
			r.http.Handle("/debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
			r.http.Handle("/debug/pprof/profile", http.HandlerFunc(pprof.Profile))
			r.http.Handle("/debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
			r.http.Handle("/debug/pprof/trace", http.HandlerFunc(pprof.Trace))
		}
	}
	r.grpc = grpc.NewServer()
	registerapi.RegisterRegistrationServer(r.grpc, r.service)
	return r, nil
}

// driverName connects to the driver and calls GetPluginInfo once under --timeout, as upstream does: a driver
// that cannot name itself gets the container restarted rather than a registrar that waits.
func driverName(ctx context.Context, cfg Config) (string, error) {
	klog.FromContext(ctx).V(1).Info("Connecting to the CSI driver", "csiAddress", cfg.CSIAddress)
	conn, err := csiconn.Connect(ctx, csiconn.Options{
		Address: cfg.CSIAddress,
		Timeout: cfg.Timeout,
		// The connection is closed once the name is known; a loss before then fails GetPluginInfo.
		OnConnectionLoss: func(context.Context) bool { return false },
	})
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	name, err := conn.DriverName(ctx)
	if err != nil {
		return "", fmt.Errorf("asking the CSI driver at %s for its name: %w", cfg.CSIAddress, err)
	}
	return name, nil
}

// Driver is the driver's name, from GetPluginInfo.
func (r *Registrar) Driver() string { return r.driver }

// SocketPath is the registration socket.
func (r *Registrar) SocketPath() string { return r.socket }

// HTTP is the diagnostics server, nil without --http-endpoint or --health-port.
func (r *Registrar) HTTP() *httpserver.Server { return r.http }

// Serve answers the kubelet on the registration socket and serves /healthz until ctx ends or the kubelet
// reports a failed registration. Either way the registration socket is removed before it returns.
func (r *Registrar) Serve(ctx context.Context) error {
	r.served = true
	logger := klog.FromContext(ctx).WithValues("driver", r.driver, "socket", r.socket)
	ctx = klog.NewContext(ctx, logger)
	defer r.Close(ctx)

	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	errc := make(chan error, 2)
	var serving sync.WaitGroup
	serving.Go(func() {
		if err := r.grpc.Serve(r.listener); err != nil {
			errc <- fmt.Errorf("serving the registration socket %s: %w", r.socket, err)
		}
	})
	if r.http != nil {
		serving.Go(func() {
			if err := r.http.Serve(serveCtx); err != nil {
				errc <- err
			}
		})
	}
	logger.Info("Registration server started, waiting for the kubelet's plugin watcher")

	var err error
	select {
	case <-ctx.Done():
		logger.Info("Stopping; removing the registration socket")
	case <-r.service.failed:
		_, err = r.service.status()
	case err = <-errc:
	}
	r.stopGRPC()
	stopServing()
	serving.Wait()
	return err
}

// stopGRPC lets calls in flight (the kubelet's NotifyRegistrationStatus that ended Serve, among others) finish,
// for up to stopTimeout.
func (r *Registrar) stopGRPC() {
	done := make(chan struct{})
	go func() {
		r.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(stopTimeout):
		r.grpc.Stop()
		<-done
	}
}

// Close stops listening and removes the registration socket if it is still the one this registrar created,
// which tells the kubelet's plugin watcher that the plugin is gone. Serve calls it; call it only if Serve is
// never called.
func (r *Registrar) Close(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if r.grpc != nil {
		r.grpc.Stop()
	}
	if r.http != nil && !r.served {
		// httpserver closes its listener only when a Serve ends: serve with a context that has already ended.
		stopped, cancel := context.WithCancel(ctx)
		cancel()
		_ = r.http.Serve(stopped)
	}
	_ = r.listener.Close()
	now, err := os.Lstat(r.socket)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return
	case err != nil:
		logger.Error(err, "Cannot check the registration socket before removing it", "socket", r.socket)
		return
	case !os.SameFile(now, r.created):
		logger.Info("The registration socket was replaced by someone else; leaving it", "socket", r.socket)
		return
	}
	if err := os.Remove(r.socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		logger.Error(err, "Removing the registration socket failed", "socket", r.socket)
	}
}
