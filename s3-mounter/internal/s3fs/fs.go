// Package s3fs is the filesystem s3-fuse serves: S3 keys split at "/" into directories, reads through
// the prefetcher, new files uploaded as they are written, and Mountpoint's rules for what is refused.
package s3fs

import (
	"context"
	"math"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/s3-mounter/internal/bufpool"
	"github.com/stowage-csi/stowage/s3-mounter/internal/prefetch"
	"github.com/stowage-csi/stowage/s3-mounter/internal/s3client"
	"github.com/stowage-csi/stowage/s3-mounter/internal/upload"
)

// Client is the S3 surface the filesystem uses.
type Client interface {
	Head(ctx context.Context, key string) (s3client.ObjectInfo, error)
	List(ctx context.Context, prefix, delimiter, token string, maxKeys int32) (s3client.ListPage, error)
	Delete(ctx context.Context, key string) error
	prefetch.Getter
	upload.Client
}

// Config is what the filesystem needs from the command line.
type Config struct {
	Prefix            string
	UID, GID          uint32
	DirMode, FileMode uint32
	// MetadataTTL is how long lookups and listings are trusted; 0 with MinimalTTL for "minimal".
	MetadataTTL time.Duration
	// NegativeTTL is how long the kernel may remember that a name does not exist
	// (--negative-metadata-ttl; 0 by default, so an object created elsewhere shows up at once).
	NegativeTTL    time.Duration
	ReadOnly       bool
	AllowDelete    bool
	AllowOverwrite bool
	AllowOther     bool
	AllowRoot      bool
	Read           prefetch.Config
	WritePartSize  int
	// UploadConcurrency bounds the parts of one file uploaded at once.
	UploadConcurrency int
	Debug             bool
}

// Filesystem holds the state shared by all nodes.
type Filesystem struct {
	client Client
	cfg    Config
	// mounter is the uid that started s3-fuse, for --allow-root.
	mounter uint32
	// ctx is the lifetime of the mount; background work (uploads) derives from it.
	ctx context.Context
	// started is shown as directories' times: S3 keeps none for prefixes.
	started time.Time
	log     logr.Logger
	// upload sizes every file's upload; its pool recycles part buffers across files.
	upload upload.Config
}

// uninterrupted is the context of the S3 calls a FUSE request makes (Head, List, Delete): the request's values
// without its cancellation, ended only with the mount. go-fuse cancels a request's context when the kernel
// forwards an interrupt, and the kernel forwards one for any signal the caller gets, Go's preemption signal
// (SIGURG) included; a lookup answered EINTR then fails the caller's stat or unlink, which few programs retry.
// Mountpoint ignores interrupts, and so does this: the call ends as it would have.
func (f *Filesystem) uninterrupted(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(f.ctx, cancel)
	return c, func() {
		stop()
		cancel()
	}
}

// readdirGrace is how long a listing answers lookups even with --metadata-ttl minimal, so the kernel's
// per-entry lookups right after readdir (readdirplus) do not each cost S3 requests.
const readdirGrace = time.Second

// maxKernelTTL keeps "indefinite" within what the kernel accepts.
const maxKernelTTL = 365 * 24 * time.Hour

// NewRoot returns the root directory node for cfg.
func NewRoot(ctx context.Context, client Client, cfg Config) *DirNode {
	f := &Filesystem{
		client: client, cfg: cfg, mounter: uint32(syscall.Geteuid()), ctx: ctx, started: time.Now(), log: klog.FromContext(ctx),
		upload: upload.Config{
			PartSize: cfg.WritePartSize, Concurrency: cfg.UploadConcurrency,
			Pool: bufpool.New(cfg.WritePartSize, cfg.UploadConcurrency+1),
		},
	}
	return newDirNode(f, cfg.Prefix, false)
}

// MountOptions returns go-fuse options for cfg: 1 MiB reads and writes (they doubled FUSE throughput on
// the benchmark, against go-fuse's 128 KiB default), kernel caching for the metadata TTL, and
// Mountpoint's permission options.
func MountOptions(cfg Config, fsName string) *fs.Options {
	ttl := min(cfg.MetadataTTL, maxKernelTTL)
	neg := min(cfg.NegativeTTL, maxKernelTTL)
	opts := &fs.Options{
		EntryTimeout:    &ttl,
		AttrTimeout:     &ttl,
		NegativeTimeout: &neg,
		UID:             cfg.UID,
		GID:             cfg.GID,
		MountOptions: fuse.MountOptions{
			FsName:        fsName,
			Name:          "mountpoint-s3",
			AllowOther:    cfg.AllowOther || cfg.AllowRoot,
			MaxWrite:      1 << 20,
			MaxReadAhead:  1 << 20,
			MaxBackground: 64,
			DirectMount:   true,
			DisableXAttrs: true,
			// Without it the kernel strips O_TRUNC and truncates with a separate setattr, which cannot
			// be told apart from a truncate(2) of an existing object.
			ExtraCapabilities: fuse.CAP_ATOMIC_O_TRUNC,
			Options:           []string{"default_permissions"},
			Debug:             cfg.Debug,
		},
	}
	if cfg.ReadOnly {
		opts.MountOptions.Options = append(opts.MountOptions.Options, "ro")
	}
	return opts
}

// allowed implements --allow-root: the kernel lets everyone in (allow_other) and this lets only root
// and the mounting user through.
func (f *Filesystem) allowed(ctx context.Context) syscall.Errno {
	if !f.cfg.AllowRoot {
		return 0
	}
	caller, ok := fuse.FromContext(ctx)
	if !ok || caller.Uid == 0 || caller.Uid == f.mounter {
		return 0
	}
	return syscall.EACCES
}

func (f *Filesystem) kernelTTL() time.Duration {
	return min(f.cfg.MetadataTTL, maxKernelTTL)
}

func (f *Filesystem) fresh(at time.Time, grace time.Duration) bool {
	if at.IsZero() {
		return false
	}
	ttl := max(f.cfg.MetadataTTL, grace)
	if ttl >= time.Duration(math.MaxInt64)/2 {
		return true
	}
	return time.Since(at) < ttl
}

func (f *Filesystem) dirAttr(out *fuse.Attr) {
	out.Mode = syscall.S_IFDIR | f.cfg.DirMode
	out.Nlink = 2
	out.Uid, out.Gid = f.cfg.UID, f.cfg.GID
	out.Blksize = 4096
	out.SetTimes(&f.started, &f.started, &f.started)
}

func (f *Filesystem) fileAttr(out *fuse.Attr, size int64, mtime time.Time) {
	out.Mode = syscall.S_IFREG | f.cfg.FileMode
	out.Nlink = 1
	out.Uid, out.Gid = f.cfg.UID, f.cfg.GID
	out.Size = uint64(size)
	out.Blocks = uint64((size + 511) / 512)
	out.Blksize = 1 << 20
	if !mtime.IsZero() {
		out.SetTimes(&mtime, &mtime, &mtime)
	}
}

// statfs reports a filesystem too large to fill, as Mountpoint does: S3 has no capacity limit.
func statfs(out *fuse.StatfsOut) {
	const big = math.MaxUint64 / 4096 / 2
	out.Blocks, out.Bfree, out.Bavail = big, big, big
	out.Files, out.Ffree = math.MaxUint32, math.MaxUint32
	out.Bsize, out.Frsize = 4096, 4096
	out.NameLen = 255
}

// fail logs a failed operation (V(2) for the expected ENOENT) and returns its errno.
func (f *Filesystem) fail(op, key string, err error) syscall.Errno {
	errno := s3client.ToErrno(err)
	level := 0
	if errno == syscall.ENOENT {
		level = 2
	}
	f.log.V(level).Info("operation failed", "op", op, "key", key, "errno", errno.Error(), "err", err)
	return errno
}
