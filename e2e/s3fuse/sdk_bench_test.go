//go:build bench

package s3fuse

import (
	"bytes"
	"context"

	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The benchmarks measure their limit with aws-sdk-go-v2's feature/s3/manager, which is deprecated in
// favour of feature/s3/transfermanager. They keep it on purpose: transfermanager is still v0.x and needs
// newer aws-sdk-go-v2 and service/s3 modules than s3-fuse is built with, and go.work would raise them for
// s3-fuse too, so the limit would no longer be the SDK s3-fuse itself runs on. These two helpers are the
// only uses.

// sdkUpload stores data as key with manager.Upload: multipart, parts of partSize, 4 at a time.
func sdkUpload(ctx context.Context, client *s3.Client, bucket, key string, data []byte, partSize int64) error {
	//lint:ignore SA1019 the limit uses the SDK s3-fuse is built with; transfermanager needs a newer one (see above)
	up := manager.NewUploader(client, func(u *manager.Uploader) { u.PartSize = partSize; u.Concurrency = 4 })
	//lint:ignore SA1019 the limit uses the SDK s3-fuse is built with; transfermanager needs a newer one (see above)
	_, err := up.Upload(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data)})
	return err
}

// sdkDownload reads key into dst with manager.Download: ranged GETs of partSize, concurrency at a time.
// It returns the number of bytes read.
func sdkDownload(ctx context.Context, client *s3.Client, bucket, key string, dst []byte, partSize int64, concurrency int) (int64, error) {
	//lint:ignore SA1019 the limit uses the SDK s3-fuse is built with; transfermanager needs a newer one (see above)
	down := manager.NewDownloader(client, func(d *manager.Downloader) { d.PartSize = partSize; d.Concurrency = concurrency })
	//lint:ignore SA1019 the limit uses the SDK s3-fuse is built with; transfermanager needs a newer one (see above)
	return down.Download(ctx, manager.NewWriteAtBuffer(dst), &s3.GetObjectInput{Bucket: &bucket, Key: &key})
}
