// Package driver is the CSI node plugin s3.csi.aws.com: the identity and node services, one file per
// operation. It has no controller service, as upstream (buckets are provisioned outside Kubernetes).
package driver

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/s3-node/internal/attachments"
	"github.com/stowage-csi/stowage/s3-node/internal/credentials"
	"github.com/stowage-csi/stowage/s3-node/internal/mounter"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// maxRecvMsgSize is upstream's gRPC limit.
const maxRecvMsgSize = 2 << 20

// Lookup finds a workload's attachment and Mountpoint Pod (attachments.Store).
type Lookup interface {
	Find(ctx context.Context, k attachments.Key, workloadUID string) (*s3api.MountpointS3PodAttachment, string, error)
	RunningPod(ctx context.Context, name string) (*corev1.Pod, error)
}

// Options configure the driver.
type Options struct {
	NodeID   string
	Endpoint string
	// Version is the driver's version (GetPluginInfo, the user agent).
	Version string
	// KubernetesVersion goes into Mountpoint's user agent ("" when unknown).
	KubernetesVersion string
	// InstallationType is INSTALLATION_TYPE, for the user agent.
	InstallationType string
	Lookup           Lookup
	Mounter          *mounter.Mounter
	// DriverCredentials are the node plugin's own AWS credentials (authenticationSource driver).
	DriverCredentials credentials.DriverEnv
	// NodeEnv is the AWS_REGION, AWS_DEFAULT_REGION and AWS_STS_REGIONAL_ENDPOINTS the node plugin has.
	NodeEnv map[string]string
	// PodIdentityAgentURI is EKS_POD_IDENTITY_AGENT_CONTAINER_CREDENTIALS_FULL_URI.
	PodIdentityAgentURI string
}

// Driver serves CSI.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	opts Options
}

// New returns a driver.
func New(opts Options) *Driver { return &Driver{opts: opts} }

// Run serves the identity and node services on the endpoint until ctx ends.
func (d *Driver) Run(ctx context.Context) error {
	network, addr, err := ParseEndpoint(d.opts.Endpoint)
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
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxRecvMsgSize), grpc.UnaryInterceptor(logInterceptor(logger)))
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	logger.Info("Serving CSI", "endpoint", d.opts.Endpoint, "driver", s3api.DriverName, "version", d.opts.Version, "node", d.opts.NodeID)
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

// ParseEndpoint reads --endpoint: unix:///abs, unix://rel (relative to /, upstream's default
// unix://tmp/csi.sock), unix:/abs, or tcp://host:port.
func ParseEndpoint(ep string) (network, addr string, err error) {
	u, err := url.Parse(ep)
	if err != nil {
		return "", "", fmt.Errorf("--endpoint %q: %w", ep, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "unix":
		addr = u.Path
		if u.Host != "" {
			addr = "/" + u.Host + u.Path
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
		// Requests carry service account tokens in their volume context: only their type is logged.
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
