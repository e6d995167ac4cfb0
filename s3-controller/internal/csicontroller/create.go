package csicontroller

import (
	"context"
	"errors"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// CreateVolume gives a volume its own key prefix in the class's bucket. It writes nothing to S3 (a prefix
// exists once a key is under it) and derives everything from the name and parameters, so a repeated call
// returns the same volume. The bucket must exist: a class naming a missing bucket fails here, with an
// Event on the claim, rather than at mount time on some node.
func (s *Server) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "volume_content_source: S3 volumes cannot be cloned or restored from snapshots")
	}
	params, err := parseParams(req.GetParameters())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	prefix, err := expandPrefix(params.prefixTmpl, req.GetName(), req.GetParameters())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := s.checkBucket(ctx, params.bucket); err != nil {
		return nil, err
	}
	id := volumeID{Bucket: params.bucket, Prefix: prefix, DeleteObjects: params.deleteObjects}
	vc := map[string]string{ParamBucketName: params.bucket, AttrPrefix: prefix}
	for k, v := range params.attributes {
		vc[k] = v
	}
	klog.FromContext(ctx).Info("Volume provisioned", "name", req.GetName(), "volumeID", id.String())
	// S3 has no size: the volume reports what was asked, so the PV shows the claim's request.
	capacity := req.GetCapacityRange().GetRequiredBytes()
	if capacity == 0 {
		capacity = req.GetCapacityRange().GetLimitBytes()
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id.String(), CapacityBytes: capacity, VolumeContext: vc}}, nil
}

// checkBucket asks S3 for the bucket with the controller's credentials and maps the answer to a CSI code
// whose message names the parameter.
func (s *Server) checkBucket(ctx context.Context, bucket string) error {
	_, err := s.opts.S3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &bucket})
	if err == nil {
		return nil
	}
	where := "on AWS S3"
	if s.opts.S3Endpoint != "" {
		where = "at " + s.opts.S3Endpoint
	}
	switch httpStatus(err) {
	case http.StatusNotFound:
		return status.Errorf(codes.InvalidArgument, "parameter %s=%q: the bucket does not exist %s", ParamBucketName, bucket, where)
	case http.StatusForbidden:
		return status.Errorf(codes.PermissionDenied, "parameter %s=%q: the controller's credentials may not access the bucket %s: %v", ParamBucketName, bucket, where, err)
	case http.StatusMovedPermanently, http.StatusBadRequest:
		return status.Errorf(codes.InvalidArgument, "parameter %s=%q: the bucket is not reachable in the controller's region %s (set --s3-region or AWS_REGION): %v", ParamBucketName, bucket, where, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return status.Errorf(codes.DeadlineExceeded, "check bucket %s %s: %v", bucket, where, err)
	}
	return status.Errorf(codes.Unavailable, "check bucket %s (parameter %s) %s: %v", bucket, ParamBucketName, where, err)
}

// httpStatus is the HTTP status of an S3 answer, 0 when there was none.
func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}
