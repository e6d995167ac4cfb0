// Package s3client is the S3 side of s3-fuse: it builds an aws-sdk-go-v2 client from the standard
// configuration chain and exposes the few object calls the filesystem makes, in plain Go types.
package s3client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/s3-mounter/internal/prefetch"
	"github.com/stowage-csi/stowage/s3-mounter/internal/upload"
)

// DefaultMaxAttempts is used when AWS_MAX_ATTEMPTS is unset; Mountpoint also retries up to 10 times.
const DefaultMaxAttempts = 10

// Options configures the client.
type Options struct {
	Bucket          string
	Region          string
	EndpointURL     string
	ForcePathStyle  bool
	NoSignRequest   bool
	UserAgentPrefix string
	StorageClass    string
	SSE             string
	SSEKMSKeyID     string
	// MaxConns bounds idle connections kept per host; parallel ranged GETs need one each.
	MaxConns int
	// MaxBytesPerSecond caps object data moved both ways (--maximum-throughput-gbps); 0: no cap.
	MaxBytesPerSecond float64
	// Profile selects a profile of the shared config and credentials files (--profile).
	Profile string
	// DualStack and Accelerate choose S3's dual-stack or Transfer Acceleration endpoints when EndpointURL
	// is empty (--dual-stack, --transfer-acceleration).
	DualStack, Accelerate bool
	// RequesterPays and ExpectedBucketOwner become headers of every request (--requester-pays,
	// --expected-bucket-owner).
	RequesterPays       bool
	ExpectedBucketOwner string
	// NoUploadChecksums leaves the CRC32C out of uploads (--upload-checksums off), for servers without
	// additional checksums.
	NoUploadChecksums bool
	// Bind names network interfaces connections are bound to, in turn (--bind).
	Bind []string
}

// Client performs object operations on one bucket.
type Client struct {
	s3     *s3.Client
	bucket string
	opts   Options
	// cfg and region are what s3 was built from; Validate rebuilds s3 for the bucket's region.
	cfg    aws.Config
	region Region
	// throughput paces object data; nil without --maximum-throughput-gbps.
	throughput *Throughput
}

// ObjectInfo is what the filesystem knows about an object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ETag    string
	ModTime time.Time
}

// ListPage is one ListObjectsV2 page.
type ListPage struct {
	Objects  []ObjectInfo
	Prefixes []string
	Next     string
}

// New loads the default AWS configuration (environment, shared files, AWS_PROFILE, web identity,
// container credentials, IMDS) and builds the client.
func New(ctx context.Context, o Options) (*Client, error) {
	maxConns := o.MaxConns
	if maxConns < 16 {
		maxConns = 16
	}
	// A BuildableClient keeps AWS_CA_BUNDLE working: the SDK can only add a CA pool to its own client type.
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = 2 * maxConns
		t.MaxIdleConnsPerHost = maxConns
		t.ReadBufferSize = 256 << 10
		t.WriteBufferSize = 256 << 10
	})
	if len(o.Bind) > 0 {
		control, err := bindControl(o.Bind)
		if err != nil {
			return nil, err
		}
		httpClient = httpClient.WithDialerOptions(func(d *net.Dialer) { d.Control = control })
	}
	loadOpts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(httpClient),
		// CRC checksums on every GET and upload cost CPU that a 2-core node needs for the data itself;
		// this is what Mountpoint's --upload-checksums off does for uploads.
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if o.NoSignRequest {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	}
	if o.Profile != "" {
		loadOpts = append(loadOpts, config.WithSharedConfigProfile(o.Profile))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	region := resolveRegion(ctx, o.Region, cfg)
	cfg.Region = region.Name
	if o.EndpointURL != "" && !region.UserSpecified {
		klog.FromContext(ctx).Info("Endpoint given without a region: signing for the region chosen", "region", region.Name, "source", region.Source)
	} else {
		klog.FromContext(ctx).V(2).Info("Region chosen", "region", region.Name, "source", region.Source)
	}
	attempts := cfg.RetryMaxAttempts
	if attempts == 0 {
		attempts = maxAttemptsFromEnv()
	}
	cfg.Retryer = func() aws.Retryer {
		// No client-side retry quota: under sustained 503 SlowDown the quota would fail requests early.
		return retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = attempts
			so.RateLimiter = ratelimit.None
		})
	}
	return &Client{s3: newS3(cfg, o), bucket: o.Bucket, opts: o, cfg: cfg, region: region,
		throughput: NewThroughput(o.MaxBytesPerSecond)}, nil
}

// newS3 builds the S3 client of cfg (whose region it signs for) with o's endpoint and request choices.
func newS3(cfg aws.Config, o Options) *s3.Client {
	return s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.EndpointURL != "" {
			so.BaseEndpoint = aws.String(o.EndpointURL)
		} else {
			// Endpoint choices only: with --endpoint-url the user named the endpoint (options warns).
			so.UseAccelerate = o.Accelerate
			if o.DualStack {
				so.EndpointOptions.UseDualStackEndpoint = aws.DualStackEndpointStateEnabled
			}
		}
		so.UsePathStyle = o.ForcePathStyle
		so.APIOptions = append(so.APIOptions, detectWrongRegion)
		if h := requestHeaders(o); len(h) > 0 {
			so.APIOptions = append(so.APIOptions, setHeaders(h))
		}
		if o.UserAgentPrefix != "" {
			so.APIOptions = append(so.APIOptions, userAgentPrefix(o.UserAgentPrefix))
		}
	})
}

// Region is the region requests are signed for.
func (c *Client) Region() Region { return c.region }

// Validate lists the mounted prefix once, as mount-s3 does before it mounts (so a policy that grants only
// the prefix is enough). When S3 answers that the bucket is in another region and the region was not
// the user's choice, it moves the client to the bucket's region for good and lists again: mount-s3's
// redirect. With --endpoint-url the endpoint stays and only the signing region follows, as mount-s3's
// endpoint configuration keeps the URL when it changes the region. Validate runs before the client is
// shared: it replaces the SDK client in place.
func (c *Client) Validate(ctx context.Context, prefix string) error {
	err := c.listEmpty(ctx, prefix)
	var wrong *WrongRegionError
	if !errors.As(err, &wrong) {
		return err
	}
	if c.region.UserSpecified {
		return fmt.Errorf("bucket %s is in region %s, not %s (from %s, which is not corrected): %w",
			c.bucket, wrong.Region, c.region.Name, c.region.Source, err)
	}
	klog.FromContext(ctx).Info("Bucket is in another region; redirecting", "bucket", c.bucket,
		"region", wrong.Region, "tried", c.region.Name, "triedFrom", c.region.Source)
	c.cfg.Region = wrong.Region
	c.region = Region{Name: wrong.Region, Source: "the bucket's redirect from " + c.region.Name}
	c.s3 = newS3(c.cfg, c.opts)
	if err := c.listEmpty(ctx, prefix); err != nil {
		return fmt.Errorf("bucket %s in region %s: %w", c.bucket, wrong.Region, err)
	}
	return nil
}

// listEmpty sends a ListObjectsV2 for no keys under prefix: the cheapest request that checks the bucket,
// the credentials and the region together.
func (c *Client) listEmpty(ctx context.Context, prefix string) error {
	_, err := c.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &c.bucket, Prefix: &prefix, MaxKeys: aws.Int32(0)})
	return err
}

func maxAttemptsFromEnv() int {
	if n, err := strconv.Atoi(os.Getenv("AWS_MAX_ATTEMPTS")); err == nil && n > 0 {
		return n
	}
	return DefaultMaxAttempts
}

func userAgentPrefix(prefix string) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Build.Add(middleware.BuildMiddlewareFunc("S3FuseUserAgentPrefix",
			func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
				if req, ok := in.Request.(*smithyhttp.Request); ok {
					req.Header.Set("User-Agent", strings.TrimSpace(prefix+" "+req.Header.Get("User-Agent")))
				}
				return next.HandleBuild(ctx, in)
			}), middleware.After)
	}
}

// unsignedPayload skips SHA-256 of upload bodies (the signature covers headers only), which halves the
// CPU cost of writing; Mountpoint's CRT client signs uploads the same way.
func unsignedPayload(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
}

// Head returns an object's metadata.
func (c *Client) Head(ctx context.Context, key string) (ObjectInfo, error) {
	out, err := c.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &c.bucket, Key: &key})
	if err != nil {
		return ObjectInfo{}, err
	}
	return ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag), ModTime: aws.ToTime(out.LastModified)}, nil
}

// List returns one page of keys and common prefixes under prefix, split at delimiter.
func (c *Client) List(ctx context.Context, prefix, delimiter, token string, maxKeys int32) (ListPage, error) {
	in := &s3.ListObjectsV2Input{Bucket: &c.bucket, Prefix: &prefix}
	if delimiter != "" {
		in.Delimiter = &delimiter
	}
	if token != "" {
		in.ContinuationToken = &token
	}
	if maxKeys > 0 {
		in.MaxKeys = &maxKeys
	}
	out, err := c.s3.ListObjectsV2(ctx, in)
	if err != nil {
		return ListPage{}, err
	}
	var p ListPage
	for _, o := range out.Contents {
		p.Objects = append(p.Objects, ObjectInfo{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag), ModTime: aws.ToTime(o.LastModified)})
	}
	for _, cp := range out.CommonPrefixes {
		p.Prefixes = append(p.Prefixes, aws.ToString(cp.Prefix))
	}
	if aws.ToBool(out.IsTruncated) {
		p.Next = aws.ToString(out.NextContinuationToken)
	}
	return p, nil
}

// GetRange fills dst with the object's bytes starting at off. A non-empty etag pins the version read,
// so a concurrent overwrite fails the read (PreconditionFailed) instead of mixing two objects.
func (c *Client) GetRange(ctx context.Context, obj prefetch.Object, off int64, dst []byte) error {
	if len(dst) == 0 {
		return nil
	}
	body, err := c.GetStream(ctx, obj, off, int64(len(dst)))
	if err != nil {
		return err
	}
	defer body.Close()
	n, err := io.ReadFull(body, dst)
	if err != nil {
		return fmt.Errorf("read %s bytes %d-%d: got %d: %w", obj.Key, off, off+int64(len(dst))-1, n, err)
	}
	return nil
}

// GetStream sends one ranged GET for bytes [off, off+n) (n > 0), pinned to obj's ETag like GetRange,
// and returns the response body; the caller reads and closes it.
func (c *Client) GetStream(ctx context.Context, obj prefetch.Object, off, n int64) (io.ReadCloser, error) {
	key, etag := obj.Key, obj.ETag
	rng := fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	in := &s3.GetObjectInput{Bucket: &c.bucket, Key: &key, Range: &rng}
	if etag != "" {
		in.IfMatch = &etag
	}
	out, err := c.s3.GetObject(ctx, in)
	if err != nil {
		return nil, err
	}
	return c.throughput.Body(ctx, out.Body), nil
}

// crc32cHeader is the x-amz-checksum-crc32c value of a CRC32C: base64 of its 4 big-endian bytes.
func crc32cHeader(sum uint32) *string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], sum)
	return aws.String(base64.StdEncoding.EncodeToString(b[:]))
}

// checksum is the x-amz-checksum-crc32c value of sum, or nil with --upload-checksums off.
func (c *Client) checksum(sum uint32) *string {
	if c.opts.NoUploadChecksums {
		return nil
	}
	return crc32cHeader(sum)
}

// Put uploads a whole object in one request, with the CRC32C of data (sum) for the server to check.
func (c *Client) Put(ctx context.Context, key string, data []byte, sum uint32) (string, error) {
	if err := c.throughput.Wait(ctx, len(data)); err != nil {
		return "", err
	}
	in := &s3.PutObjectInput{
		Bucket: &c.bucket, Key: &key, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		ChecksumCRC32C: c.checksum(sum),
	}
	c.applyPut(&in.StorageClass, &in.ServerSideEncryption, &in.SSEKMSKeyId)
	out, err := c.s3.PutObject(ctx, in, unsignedPayload)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

// CreateMultipart starts a multipart upload whose parts carry CRC32C checksums (Mountpoint's default).
// Declaring the algorithm up front also spares the server a checksum of its own choosing (versitygw
// would compute CRC64NVME of every part, twice the CPU of the CRC32C it verifies instead).
func (c *Client) CreateMultipart(ctx context.Context, key string) (string, error) {
	in := &s3.CreateMultipartUploadInput{Bucket: &c.bucket, Key: &key}
	if !c.opts.NoUploadChecksums {
		in.ChecksumAlgorithm = types.ChecksumAlgorithmCrc32c
	}
	c.applyPut(&in.StorageClass, &in.ServerSideEncryption, &in.SSEKMSKeyId)
	out, err := c.s3.CreateMultipartUpload(ctx, in)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.UploadId), nil
}

// UploadPart uploads part number n (1-based) with the CRC32C of data (sum) and returns its ETag. The
// checksum goes in a header, so the body is sent as is (no aws-chunked trailer).
func (c *Client) UploadPart(ctx context.Context, key, uploadID string, n int32, data []byte, sum uint32) (string, error) {
	// The part's bytes are paid for before it is sent: parts are a few MiB, so the average rate holds.
	if err := c.throughput.Wait(ctx, len(data)); err != nil {
		return "", err
	}
	out, err := c.s3.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: &c.bucket, Key: &key, UploadId: &uploadID, PartNumber: &n,
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))), ChecksumCRC32C: c.checksum(sum),
	}, unsignedPayload)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

// CompleteMultipart finishes an upload from its parts' ETags and checksums, in part order.
func (c *Client) CompleteMultipart(ctx context.Context, key, uploadID string, done []upload.Part) (string, error) {
	parts := make([]types.CompletedPart, len(done))
	for i, p := range done {
		parts[i] = types.CompletedPart{ETag: aws.String(p.ETag), PartNumber: aws.Int32(int32(i + 1)), ChecksumCRC32C: c.checksum(p.CRC32C)}
	}
	out, err := c.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &c.bucket, Key: &key, UploadId: &uploadID, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

// AbortMultipart drops an unfinished upload and its parts.
func (c *Client) AbortMultipart(ctx context.Context, key, uploadID string) error {
	_, err := c.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &c.bucket, Key: &key, UploadId: &uploadID})
	return err
}

// Delete removes an object.
func (c *Client) Delete(ctx context.Context, key string) error {
	_, err := c.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &c.bucket, Key: &key})
	return err
}

func (c *Client) applyPut(sc *types.StorageClass, sse *types.ServerSideEncryption, kms **string) {
	if c.opts.StorageClass != "" {
		*sc = types.StorageClass(c.opts.StorageClass)
	}
	if c.opts.SSE != "" {
		*sse = types.ServerSideEncryption(c.opts.SSE)
	}
	if c.opts.SSEKMSKeyID != "" {
		*kms = aws.String(c.opts.SSEKMSKeyID)
	}
}

// IsNotFound reports whether err says the object or key does not exist.
func IsNotFound(err error) bool {
	return errors.Is(ToErrno(err), errNoEnt)
}
