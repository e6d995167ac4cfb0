package s3fs

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stowage-csi/stowage/s3-mounter/internal/prefetch"
	"github.com/stowage-csi/stowage/s3-mounter/internal/s3client"
	"github.com/stowage-csi/stowage/s3-mounter/internal/upload"
)

// FileNode is one object, or a new file being written.
type FileNode struct {
	fs.Inode
	fsys   *Filesystem
	parent *DirNode
	name   string
	key    string

	mu     sync.Mutex
	info   s3client.ObjectInfo
	infoAt time.Time
	// writer is set while the file is being written; the object is not readable until it completes.
	writer *upload.Upload
}

var (
	_ fs.NodeGetattrer = (*FileNode)(nil)
	_ fs.NodeSetattrer = (*FileNode)(nil)
	_ fs.NodeOpener    = (*FileNode)(nil)
)

func (n *FileNode) setInfo(info s3client.ObjectInfo) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.writer != nil {
		return
	}
	n.info = info
	n.infoAt = time.Now()
}

func (n *FileNode) attr(a *fuse.Attr) {
	n.mu.Lock()
	size, mtime := n.info.Size, n.info.ModTime
	if n.writer != nil {
		size = n.writer.Written()
	}
	n.mu.Unlock()
	n.fsys.fileAttr(a, size, mtime)
}

// refresh re-reads the object's metadata when the cached copy is older than the metadata TTL.
func (n *FileNode) refresh(ctx context.Context, force bool) syscall.Errno {
	n.mu.Lock()
	stale := n.writer == nil && (force || !n.fsys.fresh(n.infoAt, 0))
	n.mu.Unlock()
	if !stale {
		return 0
	}
	headCtx, done := n.fsys.uninterrupted(ctx)
	defer done()
	info, err := n.fsys.client.Head(headCtx, n.key)
	if err != nil {
		return n.fsys.fail("head", n.key, err)
	}
	n.setInfo(info)
	return 0
}

// Getattr reports size and mtime, refreshed from S3 once the metadata TTL has passed.
func (n *FileNode) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if errno := n.refresh(ctx, false); errno != 0 {
		return errno
	}
	n.attr(&out.Attr)
	out.SetTimeout(n.fsys.kernelTTL())
	return 0
}

// Setattr only accepts what a file being written can honour (timestamps, truncating to its current
// length); S3 objects' metadata cannot be changed, so everything else is EPERM like Mountpoint.
func (n *FileNode) Setattr(ctx context.Context, _ fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	n.mu.Lock()
	w := n.writer
	n.mu.Unlock()
	if w == nil {
		return syscall.EPERM
	}
	if _, ok := in.GetMode(); ok {
		return syscall.EPERM
	}
	if _, ok := in.GetUID(); ok {
		return syscall.EPERM
	}
	if _, ok := in.GetGID(); ok {
		return syscall.EPERM
	}
	if sz, ok := in.GetSize(); ok && int64(sz) != w.Written() {
		return syscall.EPERM
	}
	n.attr(&out.Attr)
	return 0
}

// Open returns a read handle, or a write handle when the file is opened for writing with O_TRUNC and
// --allow-overwrite. Appending to or editing an existing object is EPERM, as in Mountpoint.
func (n *FileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if errno := n.fsys.allowed(ctx); errno != 0 {
		return nil, 0, errno
	}
	n.mu.Lock()
	writing := n.writer != nil
	n.mu.Unlock()
	if writing {
		// One writer at a time, and a new object is not readable before it is uploaded.
		return nil, 0, syscall.EPERM
	}
	acc := flags & syscall.O_ACCMODE
	trunc := flags&syscall.O_TRUNC != 0
	if acc == syscall.O_WRONLY || acc == syscall.O_RDWR && trunc {
		switch {
		case n.fsys.cfg.ReadOnly:
			return nil, 0, syscall.EROFS
		case !n.fsys.cfg.AllowOverwrite, !trunc:
			return nil, 0, syscall.EPERM
		}
		return n.startWrite(ctx), 0, 0
	}
	if errno := n.refresh(ctx, flags&syscall.O_DIRECT != 0); errno != 0 {
		return nil, 0, errno
	}
	n.mu.Lock()
	info := n.info
	n.mu.Unlock()
	n.fsys.log.V(4).Info("open for reading", "key", n.key, "size", info.Size)
	r := prefetch.NewReader(n.fsys.ctx, n.fsys.client, prefetch.Object{Key: n.key, ETag: info.ETag, Size: info.Size}, n.fsys.cfg.Read)
	return &readHandle{r: r, fsys: n.fsys, key: n.key}, 0, 0
}

// startWrite turns the node into a file being written and returns its handle.
func (n *FileNode) startWrite(ctx context.Context) *writeHandle {
	up := upload.New(n.fsys.ctx, n.fsys.client, n.key, n.fsys.upload)
	n.mu.Lock()
	n.writer = up
	n.info = s3client.ObjectInfo{Key: n.key, ModTime: time.Now()}
	n.mu.Unlock()
	n.parent.mu.Lock()
	n.parent.writing[n.name] = n
	n.parent.mu.Unlock()
	return &writeHandle{node: n, up: up, pid: callerProcess(ctx)}
}

// finish completes the upload (once) and publishes the object's new metadata.
func (n *FileNode) finish(up *upload.Upload) syscall.Errno {
	etag, err := up.Complete()
	n.mu.Lock()
	ok := err == nil
	if n.writer == up {
		n.writer = nil
		if ok {
			n.info = s3client.ObjectInfo{Key: n.key, Size: up.Written(), ETag: etag, ModTime: time.Now()}
			n.infoAt = time.Now()
		} else {
			n.infoAt = time.Time{}
		}
	}
	info := n.info
	n.mu.Unlock()
	n.parent.finishWrite(n.name, n, info, ok)
	if err != nil {
		return n.fsys.fail("upload", n.key, err)
	}
	n.fsys.log.V(4).Info("uploaded", "key", n.key, "size", info.Size, "etag", info.ETag)
	return 0
}

// readHandle serves reads of one open file through its prefetcher.
type readHandle struct {
	r    *prefetch.Reader
	fsys *Filesystem
	key  string
}

var (
	_ fs.FileReader   = (*readHandle)(nil)
	_ fs.FileWriter   = (*readHandle)(nil)
	_ fs.FileReleaser = (*readHandle)(nil)
)

// Read returns the prefetched bytes without copying when they sit in one part; the part buffers go
// back to the pool once go-fuse has written the reply (ReadResult.Done).
func (h *readHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	d, err := h.r.ReadAt(ctx, off, len(dest))
	if err != nil {
		return nil, h.fsys.fail("read", h.key, err)
	}
	return partsResult{d}, 0
}

// partsResult adapts prefetch.Data to go-fuse's ReadResult.
type partsResult struct {
	d *prefetch.Data
}

func (p partsResult) Bytes(buf []byte) ([]byte, fuse.Status) {
	if len(p.d.Chunks) == 1 {
		return p.d.Chunks[0], fuse.OK
	}
	n := 0
	for _, c := range p.d.Chunks {
		n += copy(buf[n:], c)
	}
	return buf[:n], fuse.OK
}

// Slices hands go-fuse the part buffers themselves: it writes them to the kernel with one writev, so
// a read spanning two parts is not copied into one buffer first, and go-fuse does not try (and fail,
// for a reply of 1 MiB plus header against a 1 MiB pipe) to splice the reply through a pipe.
func (p partsResult) Slices() ([][]byte, fuse.Status) { return p.d.Chunks, fuse.OK }

func (p partsResult) Size() int { return p.d.Len() }

func (p partsResult) Done() { p.d.Release() }

// Write on a handle opened for reading (O_RDWR without O_TRUNC) is refused.
func (h *readHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return 0, syscall.EBADF
}

// Release stops prefetching.
func (h *readHandle) Release(ctx context.Context) syscall.Errno {
	st := h.r.Stats()
	h.fsys.log.V(4).Info("closed for reading", "key", h.key, "streamedReads", st.Streamed, "directReads", st.Direct, "partGETs", st.Parts)
	h.r.Close()
	return 0
}

// writeHandle appends to an upload.
type writeHandle struct {
	node *FileNode
	up   *upload.Upload
	// pid is the process that opened the file; its close completes the upload (closes of a shared fd
	// by other processes do not).
	pid uint32
}

var (
	_ fs.FileWriter   = (*writeHandle)(nil)
	_ fs.FileReader   = (*writeHandle)(nil)
	_ fs.FileFlusher  = (*writeHandle)(nil)
	_ fs.FileFsyncer  = (*writeHandle)(nil)
	_ fs.FileReleaser = (*writeHandle)(nil)
)

// Write appends; anything but the next sequential offset aborts the upload with EINVAL.
func (h *writeHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	n, err := h.up.WriteAt(data, off)
	if err != nil {
		h.up.Abort()
		h.node.finish(h.up)
		return uint32(n), s3client.ToErrno(err)
	}
	return uint32(n), 0
}

// Read on a handle being written is refused.
func (h *writeHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return nil, syscall.EBADF
}

// Flush (close(2)) completes the upload when the opening process closes a non-empty file, so the
// object is visible when close returns; dup'ed descriptors closed by others (shells, dd) and empty
// files complete on Release instead, as in Mountpoint.
func (h *writeHandle) Flush(ctx context.Context) syscall.Errno {
	if h.up.Finished() || h.up.Written() == 0 {
		return 0
	}
	if callerProcess(ctx) != h.pid {
		return 0
	}
	return h.node.finish(h.up)
}

// Fsync completes the upload; later writes fail.
func (h *writeHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return h.node.finish(h.up)
}

// Release completes an upload no Flush completed.
func (h *writeHandle) Release(ctx context.Context) syscall.Errno {
	if h.up.Finished() {
		return 0
	}
	return h.node.finish(h.up)
}
