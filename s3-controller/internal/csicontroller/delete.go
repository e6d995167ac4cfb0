package csicontroller

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// DeleteVolume removes the objects under the volume's prefix when its class said so (recorded in the
// ID, since DeleteVolume gets no parameters), and otherwise leaves them. Deleting is idempotent: a
// missing bucket, an empty prefix and an ID this controller never made are all success, as the CSI spec
// wants for volumes that do not exist.
func (s *Server) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	logger := klog.FromContext(ctx).WithValues("volumeID", req.GetVolumeId())
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	id, err := parseVolumeID(req.GetVolumeId())
	if errors.Is(err, errNotDynamic) {
		logger.Info("Not a dynamically provisioned volume: nothing to delete")
		return &csi.DeleteVolumeResponse{}, nil
	}
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if !id.DeleteObjects {
		logger.Info("Volume deleted; its objects are kept (the class did not set "+ParamDeleteObjects+")", "bucket", id.Bucket, "prefix", id.Prefix)
		return &csi.DeleteVolumeResponse{}, nil
	}
	n, err := s.deletePrefix(ctx, id.Bucket, id.Prefix)
	if err != nil {
		code := codes.Internal
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			code = codes.DeadlineExceeded
		}
		return nil, status.Errorf(code, "delete the objects under s3://%s/%s (%d deleted so far): %v", id.Bucket, id.Prefix, n, err)
	}
	logger.Info("Volume deleted with its objects", "bucket", id.Bucket, "prefix", id.Prefix, "objects", n)
	return &csi.DeleteVolumeResponse{}, nil
}

// deletePrefix deletes every object under prefix, a page (at most 1000 keys, DeleteObjects' limit) at a
// time, and returns how many it deleted. Each round lists from the start: the keys just deleted are gone,
// so no continuation token can go stale, and a retry after a crash resumes where it stopped.
func (s *Server) deletePrefix(ctx context.Context, bucket, prefix string) (int, error) {
	deleted := 0
	for {
		page, err := s.opts.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, MaxKeys: aws.Int32(1000)})
		if httpStatus(err) == http.StatusNotFound {
			return deleted, nil // NoSuchBucket: nothing is left to delete
		}
		if err != nil {
			return deleted, fmt.Errorf("list: %w", err)
		}
		if len(page.Contents) == 0 {
			return deleted, nil
		}
		objs := make([]types.ObjectIdentifier, 0, len(page.Contents))
		for _, o := range page.Contents {
			objs = append(objs, types.ObjectIdentifier{Key: o.Key})
		}
		out, err := s.opts.S3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &bucket, Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)}})
		if err != nil {
			return deleted, fmt.Errorf("delete %d objects: %w", len(objs), err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return deleted, fmt.Errorf("%d of %d objects not deleted, first %s: %s %s", len(out.Errors), len(objs), aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
		}
		deleted += len(objs)
	}
}
