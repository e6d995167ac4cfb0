// Package driver is the CSI node plugin s3.csi.aws.com: the identity and node services, one file per
// operation. It has no controller service, as upstream (buckets are provisioned outside Kubernetes).
package driver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/s3-node/internal/attachments"
	"github.com/stowage-csi/stowage/s3-node/internal/credentials"
	"github.com/stowage-csi/stowage/s3-node/internal/mounter"
	"github.com/stowage-csi/stowage/shared/csiserver"
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
	// InstanceRegion is the node's region from IMDS, the STS region's last source; nil: the SDK's IMDS
	// as the process environment configures it.
	InstanceRegion *credentials.InstanceRegion
}

// Driver serves CSI.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	opts Options
}

// New returns a driver.
func New(opts Options) *Driver {
	if opts.InstanceRegion == nil {
		opts.InstanceRegion = credentials.NewInstanceRegion("")
	}
	return &Driver{opts: opts}
}

// Run serves the identity and node services on the endpoint until ctx ends. Requests are logged by type
// only: they carry service account tokens in their volume context.
func (d *Driver) Run(ctx context.Context) error {
	klog.FromContext(ctx).Info("Serving CSI", "endpoint", d.opts.Endpoint, "driver", s3api.DriverName, "version", d.opts.Version, "node", d.opts.NodeID)
	return csiserver.Serve(ctx, "--endpoint", d.opts.Endpoint, func(srv *grpc.Server) error {
		csi.RegisterIdentityServer(srv, d)
		csi.RegisterNodeServer(srv, d)
		return nil
	}, csiserver.WithGRPCOptions(grpc.MaxRecvMsgSize(maxRecvMsgSize)))
}
