// Package mount runs s3-fuse: it checks the bucket, mounts (or serves a handed-over /dev/fd/N), and
// keeps serving until the filesystem is unmounted or the process is told to stop.
package mount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/s3-mounter/internal/bufpool"
	"github.com/stowage-csi/stowage/s3-mounter/internal/cache"
	"github.com/stowage-csi/stowage/s3-mounter/internal/options"
	"github.com/stowage-csi/stowage/s3-mounter/internal/prefetch"
	"github.com/stowage-csi/stowage/s3-mounter/internal/s3client"
	"github.com/stowage-csi/stowage/s3-mounter/internal/s3fs"
)

// validateTimeout bounds the start-up check so a wrong endpoint fails instead of hanging.
const validateTimeout = 60 * time.Second

// readWindowParts caps the prefetch window in parts: two GETs in flight per core. On 2 cores, 4 parts
// of 8-32 MiB read fastest through FUSE; 8 or 16 parallel GETs were slower (measured with dd on the
// benchmark's versitygw), as they compete with the kernel's FUSE copies for the same CPUs.
func readWindowParts() int {
	return max(4, 2*runtime.NumCPU())
}

// readBatchParts is how many parts one GET fills once a sequential reader's window is at its maximum.
// Two (16 MiB GETs with the default part size) cut the CPU per MiB read of versitygw by 12% (0.33 to
// 0.29 ms) and of s3-fuse by 5% on the benchmark: every GET costs both sides a fixed amount.
const readBatchParts = 2

// maxUploadParts caps the parts of one file uploaded concurrently.
const maxUploadParts = 4

// cachedClient reads object data through the local cache.
type cachedClient struct {
	*s3client.Client
	getter cache.Getter
}

func (c cachedClient) GetRange(ctx context.Context, obj prefetch.Object, off int64, dst []byte) error {
	return c.getter.GetRange(ctx, obj, off, dst)
}

// unmountWait bounds how long Run waits for go-fuse to finish serving after the unmount it asked for.
const unmountWait = 10 * time.Second

// Run mounts per cfg and serves until unmount or ctx ends. ready is called once: with nil when the
// filesystem is serving, or with the error that prevented it.
func Run(ctx context.Context, cfg *options.Config, ready func(error)) (err error) {
	readyCalled := false
	defer func() {
		if !readyCalled {
			ready(err)
		}
	}()
	client, err := connect(ctx, cfg)
	if err != nil {
		return err
	}
	fsClient, closeCache, err := filesystemClient(cfg, client)
	if err != nil {
		return err
	}
	defer closeCache()
	srv, err := mountFilesystem(ctx, cfg, client, fsClient)
	if err != nil {
		return err
	}
	klog.FromContext(ctx).Info("serving", "bucket", cfg.Bucket, "prefix", cfg.Prefix, "mountpoint", cfg.MountPoint)
	readyCalled = true
	ready(nil)
	return serve(ctx, cfg, srv)
}

// connect builds the S3 client and checks that the bucket answers, in its own region (s3client.Validate).
func connect(ctx context.Context, cfg *options.Config) (*s3client.Client, error) {
	client, err := s3client.New(ctx, s3client.Options{
		Bucket: cfg.Bucket, Region: cfg.Region, EndpointURL: cfg.EndpointURL, ForcePathStyle: cfg.ForcePathStyle,
		NoSignRequest: cfg.NoSignRequest, UserAgentPrefix: cfg.UserAgentPrefix, StorageClass: cfg.StorageClass,
		SSE: cfg.SSE, SSEKMSKeyID: cfg.SSEKMSKeyID, MaxConns: cfg.MaxThreads,
		MaxBytesPerSecond: s3client.GbpsToBytes(cfg.MaximumThroughputGbps),
		Profile:           cfg.Profile, DualStack: cfg.DualStack, Accelerate: cfg.TransferAcceleration,
		RequesterPays: cfg.RequesterPays, ExpectedBucketOwner: cfg.ExpectedBucketOwner,
		NoUploadChecksums: !uploadChecksums(cfg), Bind: cfg.Bind,
	})
	if err != nil {
		return nil, err
	}
	vctx, cancel := context.WithTimeout(ctx, validateTimeout)
	defer cancel()
	if err := client.Validate(vctx, cfg.Prefix); err != nil {
		return nil, fmt.Errorf("bucket %s is not accessible: %s (%w)", cfg.Bucket, s3client.ToErrno(err), err)
	}
	return client, nil
}

// filesystemClient returns the client the filesystem reads through: client itself, or with --cache the
// block cache in front of it. The returned function removes the cache.
func filesystemClient(cfg *options.Config, client *s3client.Client) (s3fs.Client, func(), error) {
	if cfg.CacheDir == "" {
		return client, func() {}, nil
	}
	c, err := cache.New(cfg.CacheDir, cfg.MaxCacheSizeMiB<<20)
	if err != nil {
		return nil, nil, err
	}
	return cachedClient{Client: client, getter: cache.Getter{Next: client, Cache: c}}, func() { _ = c.Close() }, nil
}

// mountFilesystem mounts the filesystem at cfg.MountPoint (a directory, or a /dev/fd/N handed over).
func mountFilesystem(ctx context.Context, cfg *options.Config, client *s3client.Client, fsClient s3fs.Client) (*fuse.Server, error) {
	fsCfg := FilesystemConfig(cfg)
	if cfg.CacheDir == "" {
		// Streamed GETs bypass the block cache, which works part by part.
		fsCfg.Read.Stream = client
	}
	root := s3fs.NewRoot(ctx, fsClient, fsCfg)
	opts := s3fs.MountOptions(fsCfg, "mountpoint-s3")
	// go-fuse's own messages go to the same log as ours, not to a bare stderr.
	opts.Logger = klog.NewStandardLogger("WARNING")
	if cfg.IsFDMount() {
		if err := checkFUSEFd(cfg.MountPoint); err != nil {
			return nil, err
		}
		// go-fuse tries a direct mount(2) of the path before it looks for /dev/fd/N; run by root, that
		// mount resolves /dev/fd/N to /dev/fuse and covers the machine's /dev/fuse. The fd is mounted
		// already: nothing is to be mounted here.
		opts.DirectMount, opts.DirectMountStrict = false, false
	}
	srv, err := fs.Mount(cfg.MountPoint, root, opts)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", cfg.MountPoint, err)
	}
	if !cfg.IsFDMount() {
		if err := setReadAhead(cfg.MountPoint, kernelReadAheadKiB); err != nil {
			klog.FromContext(ctx).V(2).Info("cannot raise the kernel readahead", "err", err)
		}
	}
	return srv, nil
}

// serve waits until the filesystem is unmounted, or until ctx ends and then unmounts it (unless a
// privileged parent owns the mount).
func serve(ctx context.Context, cfg *options.Config, srv *fuse.Server) error {
	logger := klog.FromContext(ctx)
	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	select {
	case <-done:
		logger.Info("unmounted", "mountpoint", cfg.MountPoint)
		return nil
	case <-ctx.Done():
	}
	if cfg.IsFDMount() {
		// The privileged parent owns the mount and unmounts it; exiting closes our end of the fd.
		logger.Info("stopping; the mount's owner unmounts it", "mountpoint", cfg.MountPoint)
		return nil
	}
	logger.Info("unmounting", "mountpoint", cfg.MountPoint)
	if err := srv.Unmount(); err != nil {
		logger.Info("unmount failed, detaching lazily", "err", err)
		if err := syscall.Unmount(cfg.MountPoint, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("unmount %s: %w", cfg.MountPoint, err)
		}
	}
	select {
	case <-done:
	case <-time.After(unmountWait):
		logger.Info("go-fuse still serving after the unmount; exiting anyway", "mountpoint", cfg.MountPoint, "waited", unmountWait)
	}
	return nil
}

// FilesystemConfig derives the filesystem's settings from the command line.
func FilesystemConfig(cfg *options.Config) s3fs.Config {
	uid, gid := uint32(os.Geteuid()), uint32(os.Getegid())
	if cfg.UIDSet {
		uid = cfg.UID
	}
	if cfg.GIDSet {
		gid = cfg.GID
	}
	parts := min(cfg.MaxThreads, readWindowParts())
	read := prefetch.DefaultConfig(cfg.ReadPartSize, parts)
	read.BatchParts = readBatchParts
	// Keep the buffers of one full window, one more part of a batched GET, the part behind the
	// reader and one being read.
	read.Pool = bufpool.New(int(cfg.ReadPartSize), parts+readBatchParts+1)
	return s3fs.Config{
		Prefix: cfg.Prefix, UID: uid, GID: gid, DirMode: cfg.DirMode, FileMode: cfg.FileMode,
		MetadataTTL: cfg.MetadataTTL, NegativeTTL: cfg.NegativeMetadataTTL, ReadOnly: cfg.ReadOnly, AllowDelete: cfg.AllowDelete,
		AllowOverwrite: cfg.AllowOverwrite, AllowOther: cfg.AllowOther, AllowRoot: cfg.AllowRoot,
		Read:              read,
		WritePartSize:     int(cfg.WritePartSize),
		UploadConcurrency: min(cfg.MaxThreads, maxUploadParts),
		Debug:             false,
	}
}

// uploadChecksums applies --upload-checksums: crc32c unless "off", and by default off for S3 on Outposts
// (an s3-outposts ARN or an access point alias ending in --op-s3), which has no additional checksums, as
// mount-s3 does.
func uploadChecksums(cfg *options.Config) bool {
	switch cfg.UploadChecksums {
	case "crc32c":
		return true
	case "off":
		return false
	}
	return !strings.Contains(cfg.Bucket, ":s3-outposts:") && !strings.HasSuffix(cfg.Bucket, "--op-s3")
}

// checkFUSEFd makes sure /dev/fd/N is an open /dev/fuse, so a wrong hand-over fails with a clear message
// rather than as a FUSE protocol error on whatever file fd N is.
func checkFUSEFd(mountPoint string) error {
	n, err := strconv.Atoi(strings.TrimPrefix(mountPoint, "/dev/fd/"))
	if err != nil {
		return fmt.Errorf("mountpoint %s: %w", mountPoint, err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(n, &st); err != nil {
		return fmt.Errorf("mountpoint %s: fd %d is not open: %w", mountPoint, n, err)
	}
	const fuseMajor, fuseMinor = 10, 229 // /dev/fuse
	if st.Mode&syscall.S_IFMT != syscall.S_IFCHR || unix.Major(st.Rdev) != fuseMajor || unix.Minor(st.Rdev) != fuseMinor {
		return fmt.Errorf("mountpoint %s: fd %d is not /dev/fuse", mountPoint, n)
	}
	return nil
}
