//go:build bench

package s3fuse

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The memory filesystem serves one read-only file from a byte slice, with s3-fuse's FUSE settings
// (1 MiB requests, 4 MiB kernel readahead, 1 s attribute cache) and no S3 at all: what FUSE alone
// costs and allows on this machine. It runs in the test process, which is also the reader.

type memRoot struct {
	fs.Inode
	data []byte
}

func (r *memRoot) OnAdd(ctx context.Context) {
	f := r.NewPersistentInode(ctx, &memFile{data: r.data}, fs.StableAttr{Mode: syscall.S_IFREG})
	r.AddChild("seq.bin", f, false)
}

type memFile struct {
	fs.Inode
	data []byte
}

var (
	_ fs.NodeOpener    = (*memFile)(nil)
	_ fs.NodeGetattrer = (*memFile)(nil)
	_ fs.NodeReader    = (*memFile)(nil)
)

func (f *memFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, 0, syscall.EROFS
	}
	return nil, 0, 0
}

func (f *memFile) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	out.Size = uint64(len(f.data))
	return 0
}

func (f *memFile) Read(ctx context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= int64(len(f.data)) {
		return sliceResult(nil), 0
	}
	return sliceResult(f.data[off:min(off+int64(len(dest)), int64(len(f.data)))]), 0
}

// sliceResult replies with the slice itself (one writev), as s3-fuse replies with its part buffers.
type sliceResult []byte

func (s sliceResult) Bytes([]byte) ([]byte, fuse.Status) { return s, fuse.OK }
func (s sliceResult) Slices() ([][]byte, fuse.Status)    { return [][]byte{s}, fuse.OK }
func (s sliceResult) Size() int                          { return len(s) }
func (s sliceResult) Done()                              {}

// mountMemory mounts a memory filesystem holding data as seq.bin; cleanup unmounts it.
func mountMemory(t *testing.T, data []byte) string {
	dir := t.TempDir()
	ttl := time.Second
	srv, err := fs.Mount(dir, &memRoot{data: data}, &fs.Options{
		EntryTimeout: &ttl, AttrTimeout: &ttl,
		MountOptions: fuse.MountOptions{
			FsName: "memory", Name: "membench", MaxWrite: 1 << 20, MaxReadAhead: 1 << 20, MaxBackground: 64,
			DirectMount: true, DisableXAttrs: true, Logger: log.New(os.Stderr, "memory fs: ", 0),
		},
	})
	if err != nil {
		t.Fatalf("mount the memory filesystem: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	// s3-fuse raises its mount's readahead the same way (internal/mount/readahead.go).
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	ra := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	if err := os.WriteFile(ra, []byte(strconv.Itoa(4096)), 0o644); err != nil {
		t.Fatalf("raise the readahead: %v", err)
	}
	return dir
}
