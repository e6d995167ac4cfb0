// Package csicontroller is s3-controller's CSI controller service for dynamic provisioning, which
// upstream lacks (mountpoint-s3-csi-driver#125): a StorageClass names a bucket, and each volume is its
// own key prefix "<prefix>/<pv name>/" in it. The volume ID carries bucket, prefix and the class's
// delete policy, so the service keeps no state. One file per operation.
package csicontroller

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// ObjectStore is what the service needs of S3 (*s3.Client has it).
type ObjectStore interface {
	HeadBucket(ctx context.Context, in *s3.HeadBucketInput, opts ...func(*s3.Options)) (*s3.HeadBucketOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, opts ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
}

// Options configure the service.
type Options struct {
	// Endpoint is the CSI socket, unix:///path or tcp://host:port.
	Endpoint string
	// Version is reported by GetPluginInfo.
	Version string
	S3      ObjectStore
	// S3Endpoint names the S3 server in error messages ("" for AWS).
	S3Endpoint string
}

// Server serves the identity and controller services.
type Server struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	opts Options
}

// New returns a server.
func New(opts Options) *Server { return &Server{opts: opts} }

// NeedLeaderElection is false: the csi-provisioner beside every replica elects its own leader and must
// reach its own replica's socket, leader or not.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves CSI on the endpoint until ctx ends (a controller-runtime Runnable).
func (s *Server) Start(ctx context.Context) error {
	network, addr, err := parseEndpoint(s.opts.Endpoint)
	if err != nil {
		return err
	}
	if network == "unix" {
		if err := os.MkdirAll(filepath.Dir(addr), 0o755); err != nil {
			return fmt.Errorf("create socket directory: %w", err)
		}
		// A socket left by a killed predecessor would make Listen fail.
		if err := os.Remove(addr); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("remove stale socket %s: %w", addr, err)
		}
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return fmt.Errorf("listen on --csi-endpoint %s: %w", s.opts.Endpoint, err)
	}
	logger := klog.FromContext(ctx)
	srv := grpc.NewServer(grpc.UnaryInterceptor(logInterceptor(logger)))
	csi.RegisterIdentityServer(srv, s)
	csi.RegisterControllerServer(srv, s)
	logger.Info("Serving the CSI controller service for dynamic provisioning", "endpoint", s.opts.Endpoint, "driver", s3api.DriverName)
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

// parseEndpoint reads unix:///abs, unix://rel (relative to /), unix:/abs or tcp://host:port.
func parseEndpoint(ep string) (network, addr string, err error) {
	u, err := url.Parse(ep)
	if err != nil {
		return "", "", fmt.Errorf("--csi-endpoint %q: %w", ep, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "unix":
		addr = u.Path
		if u.Host != "" {
			addr = "/" + u.Host + u.Path
		}
		if addr == "" {
			return "", "", fmt.Errorf("--csi-endpoint %q: no socket path", ep)
		}
		return "unix", addr, nil
	case "tcp":
		return "tcp", u.Host, nil
	}
	return "", "", fmt.Errorf("--csi-endpoint %q: scheme must be unix or tcp", ep)
}

func logInterceptor(logger klog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		l := logger.WithValues("method", info.FullMethod)
		ctx = klog.NewContext(ctx, l)
		// A class may name provisioner secrets, which then ride in the request: only its type is logged.
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
