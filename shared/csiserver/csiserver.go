// Package csiserver serves a CSI plugin's gRPC services on its endpoint, for the plugins Stowage writes
// (s3-node, s3-controller's CSI controller service): endpoint parsing as upstream's flags accept it, a stale
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

// Serve listens on endpoint (the value of flag), lets register add the services, and serves until ctx ends,
// then stops gracefully. A socket left by a killed predecessor is removed first, since Listen would fail on it.
func Serve(ctx context.Context, flag, endpoint string, register func(*grpc.Server), opts ...grpc.ServerOption) error {
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
	ln, err := net.Listen(network, addr)
	if err != nil {
		return fmt.Errorf("listen on %s %s: %w", flag, endpoint, err)
	}
	srv := grpc.NewServer(append(opts, grpc.UnaryInterceptor(LogInterceptor(klog.FromContext(ctx))))...)
	register(srv)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve CSI: %w", err)
	case <-ctx.Done():
	}
	srv.GracefulStop()
	if err := <-served; err != nil {
		return fmt.Errorf("serve CSI: %w", err)
	}
	return nil
}

// LogInterceptor gives each request a logger with its method and logs the request's type, never its body:
// requests carry secrets (provisioner secrets, service account tokens in the volume context).
func LogInterceptor(logger klog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		l := logger.WithValues("method", info.FullMethod)
		ctx = klog.NewContext(ctx, l)
		l.V(4).Info("CSI request", "type", fmt.Sprintf("%T", req))
		resp, err := handler(ctx, req)
		if err != nil {
			l.V(2).Info("CSI request failed", "err", err.Error())
		} else {
			l.V(4).Info("CSI response", "response", resp)
		}
		return resp, err
	}
}
