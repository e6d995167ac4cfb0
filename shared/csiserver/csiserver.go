// Package csiserver serves a CSI plugin's gRPC services on its endpoint, for the plugins Stowage writes
// (ebs-plugin, s3-node, s3-controller's CSI controller service): endpoint parsing as upstream's flags accept it, a stale
// socket removed, requests logged without their bodies, and a graceful stop when the context ends.
package csiserver

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// ParseEndpoint reads an endpoint flag (named flag in errors): unix:///abs, unix://rel (relative to /, as in
// upstream defaults such as unix://tmp/csi.sock), unix:/abs, or tcp://host:port.
func ParseEndpoint(flag, ep string) (network, addr string, err error) {
	u, err := url.Parse(ep)
	if err != nil {
		return "", "", fmt.Errorf("%s %q: %w", flag, ep, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "unix":
		addr = u.Path
		if u.Host != "" {
			addr = "/" + u.Host + u.Path
		}
		if addr == "" {
			return "", "", fmt.Errorf("%s %q: no socket path", flag, ep)
		}
		return "unix", addr, nil
	case "tcp":
		return "tcp", u.Host, nil
	}
	return "", "", fmt.Errorf("%s %q: scheme must be unix or tcp", flag, ep)
}

// Option changes how Serve serves.
type Option func(*settings)

type settings struct {
	grpc []grpc.ServerOption
	// describe turns a request into what is logged of it.
	describe func(req any) any
}

// WithGRPCOptions passes options to the gRPC server.
func WithGRPCOptions(opts ...grpc.ServerOption) Option {
	return func(s *settings) { s.grpc = append(s.grpc, opts...) }
}

// LogRequestBodies logs each request's body at V(4), for plugins whose requests carry no secret but in their
// secrets field: a request with secrets is logged by type only.
func LogRequestBodies() Option {
	return func(s *settings) { s.describe = withoutSecrets }
}

func withoutSecrets(req any) any {
	type secretHolder interface{ GetSecrets() map[string]string }
	if s, ok := req.(secretHolder); ok && len(s.GetSecrets()) > 0 {
		return fmt.Sprintf("%T (secrets omitted)", req)
	}
	return req
}

// Serve listens on endpoint (the value of flag), lets register add the services, and serves until ctx ends,
// then stops gracefully. A socket left by a killed predecessor is removed first, since Listen would fail on it.
// Requests are logged by type only unless LogRequestBodies is given.
func Serve(ctx context.Context, flag, endpoint string, register func(*grpc.Server) error, opts ...Option) error {
	set := settings{describe: typeOf}
	for _, o := range opts {
		o(&set)
	}
	network, addr, err := ParseEndpoint(flag, endpoint)
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
	srv := grpc.NewServer(append(set.grpc, grpc.UnaryInterceptor(logInterceptor(klog.FromContext(ctx), set.describe)))...)
	if err := register(srv); err != nil {
		return err
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return fmt.Errorf("listen on %s %s: %w", flag, endpoint, err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve CSI: %w", err)
	case <-ctx.Done():
	}
	// Serve returns as soon as the stop begins; GracefulStop returns once running calls have finished, so
	// nothing of the server outlives Serve.
	srv.GracefulStop()
	if err := <-served; err != nil {
		return fmt.Errorf("serve CSI: %w", err)
	}
	return nil
}

func typeOf(req any) any { return fmt.Sprintf("%T", req) }

// logInterceptor gives each request a logger with its method and logs what describe makes of the request.
// A failed request is logged at the default level, so that an operator sees why a volume is stuck without
// raising -v; with its method, gRPC code and message only, never the request, which may hold secrets.
func logInterceptor(logger klog.Logger, describe func(any) any) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		l := logger.WithValues("method", info.FullMethod)
		ctx = klog.NewContext(ctx, l)
		if l.V(4).Enabled() {
			l.V(4).Info("CSI request", "request", describe(req))
		}
		resp, err := handler(ctx, req)
		if st := status.Convert(err); st.Code() != codes.OK {
			l.Error(nil, "CSI request failed", "code", st.Code().String(), "message", st.Message())
		} else {
			l.V(4).Info("CSI response", "response", resp)
		}
		return resp, err
	}
}
