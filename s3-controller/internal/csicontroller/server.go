// Package csicontroller is s3-controller's CSI controller service for dynamic provisioning, which
// upstream lacks (mountpoint-s3-csi-driver#125): a StorageClass names a bucket, and each volume is its
// own key prefix "<prefix>/<pv name>/" in it. The volume ID carries bucket, prefix and the class's
// delete policy, so the service keeps no state. One file per operation.
package csicontroller

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/csiserver"
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

// Start serves CSI on the endpoint until ctx ends (a controller-runtime Runnable). Requests are logged by
// type only: a class may name provisioner secrets, which then ride in CreateVolume.
func (s *Server) Start(ctx context.Context) error {
	klog.FromContext(ctx).Info("Serving the CSI controller service for dynamic provisioning", "endpoint", s.opts.Endpoint, "driver", s3api.DriverName)
	return csiserver.Serve(ctx, "--csi-endpoint", s.opts.Endpoint, func(srv *grpc.Server) error {
		csi.RegisterIdentityServer(srv, s)
		csi.RegisterControllerServer(srv, s)
		return nil
	})
}
