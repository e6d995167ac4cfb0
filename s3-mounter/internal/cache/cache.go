// Package cache keeps object data on local disk (--cache): fixed-size blocks named by key, ETag and
// block number, so a changed object never serves old bytes, evicted oldest-first above a size limit.
package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/stowage-csi/stowage/s3-mounter/internal/prefetch"
)

// BlockSize is the unit of caching; Mountpoint also caches 1 MiB blocks.
const BlockSize = 1 << 20

// subdir is created inside the --cache directory and emptied at start, so a user's directory is never
// cleaned beyond what s3-fuse wrote.
const subdir = "s3-fuse-cache"

// Cache is a directory of blocks with a byte budget.
type Cache struct {
	dir      string
	maxBytes int64

	mu   sync.Mutex
	used int64
}

// New prepares dir/s3-fuse-cache (emptied) with a budget of maxBytes; maxBytes <= 0 means "leave 5% of
// the filesystem free", Mountpoint's default.
func New(dir string, maxBytes int64) (*Cache, error) {
	root := filepath.Join(dir, subdir)
	if err := os.RemoveAll(root); err != nil {
		return nil, fmt.Errorf("clear cache %s: %w", root, err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create cache %s: %w", root, err)
	}
	if maxBytes <= 0 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(root, &st); err != nil {
			return nil, fmt.Errorf("statfs %s: %w", root, err)
		}
		free := int64(st.Bavail) * st.Bsize
		reserve := int64(st.Blocks) * st.Bsize / 20
		maxBytes = max(free-reserve, BlockSize)
	}
	return &Cache{dir: root, maxBytes: maxBytes}, nil
}

// Close removes the cached data.
func (c *Cache) Close() error {
	return os.RemoveAll(c.dir)
}

// Used returns the bytes currently cached.
func (c *Cache) Used() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

func (c *Cache) path(obj prefetch.Object, block int64) string {
	h := sha256.Sum256([]byte(obj.Key + "\x00" + obj.ETag))
	name := hex.EncodeToString(h[:])
	return filepath.Join(c.dir, name[:2], name+"-"+strconv.FormatInt(block, 10))
}

// get returns a cached block, or nil.
func (c *Cache) get(obj prefetch.Object, block int64, want int) []byte {
	b, err := os.ReadFile(c.path(obj, block))
	if err != nil || len(b) != want {
		return nil
	}
	return b
}

// has reports whether a block is cached, without reading it.
func (c *Cache) has(obj prefetch.Object, block int64, want int) bool {
	st, err := os.Stat(c.path(obj, block))
	return err == nil && st.Size() == int64(want)
}

// put stores a block; failures only mean the block is not cached.
func (c *Cache) put(obj prefetch.Object, block int64, data []byte) {
	p := c.path(obj, block)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return
	}
	tmp := p + ".tmp" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		_ = os.Remove(tmp)
		return
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return
	}
	c.mu.Lock()
	c.used += int64(len(data))
	over := c.used > c.maxBytes
	c.mu.Unlock()
	if over {
		c.evict()
	}
}

// evict removes the least recently written blocks until the cache is at 90% of its budget.
func (c *Cache) evict() {
	type file struct {
		path string
		size int64
		mod  time.Time
	}
	var files []file
	var total int64
	_ = filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			files = append(files, file{p, info.Size(), info.ModTime()})
			total += info.Size()
		}
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return files[i].mod.Before(files[j].mod) })
	target := c.maxBytes / 10 * 9
	for _, f := range files {
		if total <= target {
			break
		}
		if os.Remove(f.path) == nil {
			total -= f.size
		}
	}
	c.mu.Lock()
	c.used = total
	c.mu.Unlock()
}

// Getter reads through the cache: cached blocks are copied from disk, runs of missing blocks are
// fetched with one ranged GET each and stored.
type Getter struct {
	Next  prefetch.Getter
	Cache *Cache
}

// GetRange implements prefetch.Getter.
func (g Getter) GetRange(ctx context.Context, obj prefetch.Object, off int64, dst []byte) error {
	if len(dst) == 0 {
		return nil
	}
	end := off + int64(len(dst))
	blockLen := func(b int64) int { return int(min(BlockSize, obj.Size-b*BlockSize)) }
	first, last := off/BlockSize, (end-1)/BlockSize
	for b := first; b <= last; {
		if data := g.Cache.get(obj, b, blockLen(b)); data != nil {
			copyOverlap(dst, off, data, b*BlockSize)
			b++
			continue
		}
		e := b
		for e < last && !g.Cache.has(obj, e+1, blockLen(e+1)) {
			e++
		}
		runOff := b * BlockSize
		runEnd := min((e+1)*BlockSize, obj.Size)
		buf := make([]byte, runEnd-runOff)
		if err := g.Next.GetRange(ctx, obj, runOff, buf); err != nil {
			return err
		}
		for i := b; i <= e; i++ {
			lo := (i - b) * BlockSize
			g.Cache.put(obj, i, buf[lo:lo+int64(blockLen(i))])
		}
		copyOverlap(dst, off, buf, runOff)
		b = e + 1
	}
	return nil
}

// copyOverlap copies the part of src (which starts at srcOff in the object) that overlaps dst (which
// starts at dstOff).
func copyOverlap(dst []byte, dstOff int64, src []byte, srcOff int64) {
	lo := max(dstOff, srcOff)
	hi := min(dstOff+int64(len(dst)), srcOff+int64(len(src)))
	if lo < hi {
		copy(dst[lo-dstOff:hi-dstOff], src[lo-srcOff:hi-srcOff])
	}
}
