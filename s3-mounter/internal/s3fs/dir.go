package s3fs

import (
	"context"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stowage-csi/stowage/s3-mounter/internal/s3client"
)

// DirNode is a directory: a key prefix ending in "/" (or the mount's root prefix).
type DirNode struct {
	fs.Inode
	fsys   *Filesystem
	prefix string

	mu sync.Mutex
	// local is set for a directory made with mkdir that S3 does not know yet.
	local bool
	// localDirs are children made with mkdir, kept until removed.
	localDirs map[string]*DirNode
	// writing are files being written here; they exist only locally until uploaded.
	writing map[string]*FileNode
	// listed is the last listing and when it was taken; lookups use it while it is fresh: for the
	// metadata TTL, and at least listedGrace.
	listed      map[string]entry
	listedAt    time.Time
	listedGrace time.Duration
	// large is set once the directory held more than one listing page; lookups then ask S3 about the
	// one name instead of listing the directory (until a readdir finds it small again).
	large bool
}

// entry is one child as S3 lists it.
type entry struct {
	dir  bool
	info s3client.ObjectInfo
}

var (
	_ fs.NodeLookuper  = (*DirNode)(nil)
	_ fs.NodeReaddirer = (*DirNode)(nil)
	_ fs.NodeMkdirer   = (*DirNode)(nil)
	_ fs.NodeCreater   = (*DirNode)(nil)
	_ fs.NodeUnlinker  = (*DirNode)(nil)
	_ fs.NodeRmdirer   = (*DirNode)(nil)
	_ fs.NodeRenamer   = (*DirNode)(nil)
	_ fs.NodeLinker    = (*DirNode)(nil)
	_ fs.NodeSymlinker = (*DirNode)(nil)
	_ fs.NodeGetattrer = (*DirNode)(nil)
	_ fs.NodeSetattrer = (*DirNode)(nil)
	_ fs.NodeStatfser  = (*DirNode)(nil)
	_ fs.NodeOpendirer = (*DirNode)(nil)
)

func newDirNode(f *Filesystem, prefix string, local bool) *DirNode {
	return &DirNode{fsys: f, prefix: prefix, local: local, localDirs: map[string]*DirNode{}, writing: map[string]*FileNode{}}
}

// validName rejects names S3 keys cannot map back to.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// Getattr reports the directory's fixed owner and mode.
func (d *DirNode) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fsys.dirAttr(&out.Attr)
	out.SetTimeout(d.fsys.kernelTTL())
	return 0
}

// Setattr is refused: S3 has no directory metadata to change.
func (d *DirNode) Setattr(ctx context.Context, _ fs.FileHandle, _ *fuse.SetAttrIn, _ *fuse.AttrOut) syscall.Errno {
	return syscall.EPERM
}

// Statfs reports unlimited space.
func (d *DirNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	statfs(out)
	return 0
}

// Opendir enforces --allow-root.
func (d *DirNode) Opendir(ctx context.Context) syscall.Errno {
	return d.fsys.allowed(ctx)
}

// Lookup finds a child: a file being written, a fresh listing entry, or S3 (a directory wins over an
// object of the same name), then a directory made with mkdir.
func (d *DirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := d.fsys.allowed(ctx); errno != 0 {
		return nil, errno
	}
	if !validName(name) {
		return nil, syscall.ENOENT
	}
	d.mu.Lock()
	if w, ok := d.writing[name]; ok {
		d.mu.Unlock()
		return d.entryOut(w.EmbeddedInode(), out, w.attr)
	}
	e, cached := d.listed[name]
	fresh := d.listed != nil && d.fsys.fresh(d.listedAt, d.listedGrace)
	cached = cached && fresh
	// With --metadata-ttl minimal a listing could answer only this lookup; HEAD and LIST key/ cost less.
	listFirst := !fresh && !d.large && d.fsys.cfg.MetadataTTL > 0
	d.mu.Unlock()
	if !cached {
		var (
			errno    syscall.Errno
			children map[string]entry
		)
		if listFirst {
			if children, errno = d.listForLookup(ctx); errno != 0 {
				return nil, errno
			}
		}
		if children != nil {
			// Under d.mu: the map is now d.listed, which finished uploads add to.
			d.mu.Lock()
			e, cached = children[name]
			d.mu.Unlock()
			if !cached {
				errno = syscall.ENOENT
			}
		} else {
			e, errno = d.remoteLookup(ctx, name)
		}
		if errno == syscall.ENOENT {
			d.mu.Lock()
			ld, ok := d.localDirs[name]
			d.mu.Unlock()
			if ok {
				return d.entryOut(ld.EmbeddedInode(), out, func(a *fuse.Attr) { d.fsys.dirAttr(a) })
			}
		}
		if errno != 0 {
			return nil, errno
		}
	}
	return d.childFor(ctx, name, e, out)
}

// lookupListKeys is the page a lookup lists: a directory of up to this many entries is listed whole.
const lookupListKeys = 1000

// listForLookup lists the directory for a lookup when it fits in one page, and keeps the listing: the
// lookups of other names that follow within the metadata TTL then need no request, so reading every file
// of a directory costs one LIST per TTL instead of a HEAD and a LIST per file. The page also answers this
// lookup, a directory shadowing an object of the same name as in a readdir. It returns no listing when
// the directory has more than one page; the directory is then marked large.
func (d *DirNode) listForLookup(ctx context.Context) (map[string]entry, syscall.Errno) {
	ctx, done := d.fsys.uninterrupted(ctx)
	defer done()
	page, err := d.fsys.client.List(ctx, d.prefix, "/", "", lookupListKeys)
	if err != nil {
		return nil, d.fsys.fail("lookup", d.prefix, err)
	}
	if page.Next != "" {
		d.mu.Lock()
		d.large = true
		d.mu.Unlock()
		return nil, 0
	}
	children := map[string]entry{}
	d.addPage(children, page)
	d.mu.Lock()
	d.listed, d.listedAt, d.listedGrace = children, time.Now(), 0
	d.mu.Unlock()
	return children, 0
}

// addPage adds a listing page's entries to children; a directory shadows an object of the same name.
func (d *DirNode) addPage(children map[string]entry, page s3client.ListPage) {
	for _, p := range page.Prefixes {
		name := strings.TrimSuffix(strings.TrimPrefix(p, d.prefix), "/")
		if validName(name) {
			children[name] = entry{dir: true}
		}
	}
	for _, o := range page.Objects {
		name := strings.TrimPrefix(o.Key, d.prefix)
		if !validName(name) {
			continue
		}
		if prev, ok := children[name]; ok && prev.dir {
			continue
		}
		children[name] = entry{info: o}
	}
}

// remoteLookup asks S3 whether name is a directory (any key below name/) or an object, in parallel.
func (d *DirNode) remoteLookup(ctx context.Context, name string) (entry, syscall.Errno) {
	ctx, done := d.fsys.uninterrupted(ctx)
	defer done()
	key := d.prefix + name
	var (
		wg      sync.WaitGroup
		info    s3client.ObjectInfo
		headErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		info, headErr = d.fsys.client.Head(ctx, key)
	}()
	page, listErr := d.fsys.client.List(ctx, key+"/", "/", "", 1)
	wg.Wait()
	if listErr == nil && (len(page.Objects) > 0 || len(page.Prefixes) > 0) {
		return entry{dir: true}, 0
	}
	if headErr == nil {
		return entry{info: info}, 0
	}
	if listErr != nil {
		return entry{}, d.fsys.fail("lookup", key+"/", listErr)
	}
	return entry{}, d.fsys.fail("lookup", key, headErr)
}

// childFor returns the inode for a looked-up child, reusing the existing one when its type matches.
func (d *DirNode) childFor(ctx context.Context, name string, e entry, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e.dir {
		if ch := d.GetChild(name); ch != nil {
			if _, ok := ch.Operations().(*DirNode); ok {
				return d.entryOut(ch, out, func(a *fuse.Attr) { d.fsys.dirAttr(a) })
			}
		}
		dn := newDirNode(d.fsys, d.prefix+name+"/", false)
		ch := d.NewInode(ctx, dn, fs.StableAttr{Mode: syscall.S_IFDIR})
		return d.entryOut(ch, out, func(a *fuse.Attr) { d.fsys.dirAttr(a) })
	}
	if ch := d.GetChild(name); ch != nil {
		if fn, ok := ch.Operations().(*FileNode); ok {
			fn.setInfo(e.info)
			return d.entryOut(ch, out, fn.attr)
		}
	}
	fn := &FileNode{fsys: d.fsys, parent: d, name: name, key: d.prefix + name}
	fn.setInfo(e.info)
	ch := d.NewInode(ctx, fn, fs.StableAttr{Mode: syscall.S_IFREG})
	return d.entryOut(ch, out, fn.attr)
}

func (d *DirNode) entryOut(ch *fs.Inode, out *fuse.EntryOut, fill func(*fuse.Attr)) (*fs.Inode, syscall.Errno) {
	fill(&out.Attr)
	out.Attr.Ino = ch.StableAttr().Ino
	ttl := d.fsys.kernelTTL()
	out.SetEntryTimeout(ttl)
	out.SetAttrTimeout(ttl)
	return ch, 0
}

// Readdir lists the prefix completely (every page), merges local directories and files being written,
// and remembers the result for the lookups that follow.
func (d *DirNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	ctx, done := d.fsys.uninterrupted(ctx)
	defer done()
	children := map[string]entry{}
	token := ""
	pages := 0
	for {
		page, err := d.fsys.client.List(ctx, d.prefix, "/", token, 0)
		if err != nil {
			return nil, d.fsys.fail("readdir", d.prefix, err)
		}
		pages++
		// A page may split a name's object from its directory prefix; the merge keeps the directory.
		d.addPage(children, page)
		if page.Next == "" {
			break
		}
		token = page.Next
	}
	d.fsys.log.V(4).Info("listed", "prefix", d.prefix, "entries", len(children))
	d.mu.Lock()
	d.listed, d.listedAt, d.listedGrace = children, time.Now(), readdirGrace
	d.large = pages > 1 || len(children) > lookupListKeys
	names := make(map[string]uint32, len(children))
	for n, e := range children {
		names[n] = modeOf(e.dir)
	}
	for n := range d.localDirs {
		names[n] = syscall.S_IFDIR
	}
	for n := range d.writing {
		if _, ok := names[n]; !ok {
			names[n] = syscall.S_IFREG
		}
	}
	d.mu.Unlock()
	list := make([]fuse.DirEntry, 0, len(names))
	for n, m := range names {
		list = append(list, fuse.DirEntry{Name: n, Mode: m})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return fs.NewListDirStream(list), 0
}

func modeOf(dir bool) uint32 {
	if dir {
		return syscall.S_IFDIR
	}
	return syscall.S_IFREG
}

// Mkdir creates a directory only in this mount; it reaches S3 when a file is written below it.
func (d *DirNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if d.fsys.cfg.ReadOnly {
		return nil, syscall.EROFS
	}
	if !validName(name) {
		return nil, syscall.EINVAL
	}
	if _, errno := d.remoteLookup(ctx, name); errno == 0 {
		return nil, syscall.EEXIST
	}
	dn := newDirNode(d.fsys, d.prefix+name+"/", true)
	ch := d.NewInode(ctx, dn, fs.StableAttr{Mode: syscall.S_IFDIR})
	d.mu.Lock()
	d.localDirs[name] = dn
	d.mu.Unlock()
	return d.entryOut(ch, out, func(a *fuse.Attr) { d.fsys.dirAttr(a) })
}

// Create starts a new object; it becomes visible in S3 when the file is closed.
func (d *DirNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if errno := d.fsys.allowed(ctx); errno != 0 {
		return nil, nil, 0, errno
	}
	if d.fsys.cfg.ReadOnly {
		return nil, nil, 0, syscall.EROFS
	}
	if !validName(name) {
		return nil, nil, 0, syscall.EINVAL
	}
	d.mu.Lock()
	_, busy := d.writing[name]
	d.mu.Unlock()
	if busy {
		return nil, nil, 0, syscall.EPERM
	}
	fn := &FileNode{fsys: d.fsys, parent: d, name: name, key: d.prefix + name}
	ch := d.NewInode(ctx, fn, fs.StableAttr{Mode: syscall.S_IFREG})
	h := fn.startWrite(ctx)
	_, errno := d.entryOut(ch, out, fn.attr)
	return ch, h, 0, errno
}

// Unlink deletes the object, only with --allow-delete and never while it is being written.
func (d *DirNode) Unlink(ctx context.Context, name string) syscall.Errno {
	if d.fsys.cfg.ReadOnly {
		return syscall.EROFS
	}
	if !d.fsys.cfg.AllowDelete {
		return syscall.EPERM
	}
	d.mu.Lock()
	_, busy := d.writing[name]
	d.mu.Unlock()
	if busy {
		return syscall.EPERM
	}
	e, errno := d.remoteLookup(ctx, name)
	if errno != 0 {
		return errno
	}
	if e.dir {
		return syscall.EISDIR
	}
	delCtx, done := d.fsys.uninterrupted(ctx)
	defer done()
	if err := d.fsys.client.Delete(delCtx, d.prefix+name); err != nil {
		return d.fsys.fail("unlink", d.prefix+name, err)
	}
	d.fsys.log.V(4).Info("deleted", "key", d.prefix+name)
	d.mu.Lock()
	delete(d.listed, name)
	d.mu.Unlock()
	return 0
}

// Rmdir removes a directory made with mkdir while it is still empty; S3 directories cannot be removed.
func (d *DirNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	if d.fsys.cfg.ReadOnly {
		return syscall.EROFS
	}
	d.mu.Lock()
	ld, isLocal := d.localDirs[name]
	d.mu.Unlock()
	e, errno := d.remoteLookup(ctx, name)
	switch {
	case errno == 0 && !e.dir:
		return syscall.ENOTDIR
	case errno == 0:
		return syscall.ENOTEMPTY
	case errno != syscall.ENOENT:
		return errno
	case !isLocal:
		return syscall.ENOENT
	}
	ld.mu.Lock()
	busy := len(ld.localDirs) > 0 || len(ld.writing) > 0
	ld.mu.Unlock()
	if busy {
		return syscall.ENOTEMPTY
	}
	d.mu.Lock()
	delete(d.localDirs, name)
	d.mu.Unlock()
	return 0
}

// Rename is not supported on general purpose buckets; Mountpoint answers ENOSYS.
func (d *DirNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.ENOSYS
}

// Link is not supported (no hard links in S3); Mountpoint answers ENOSYS.
func (d *DirNode) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.ENOSYS
}

// Symlink is not supported; Mountpoint answers ENOSYS.
func (d *DirNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.ENOSYS
}

// finishWrite moves a file from "being written" to S3's view once its upload completed.
func (d *DirNode) finishWrite(name string, fn *FileNode, info s3client.ObjectInfo, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.writing[name] == fn {
		delete(d.writing, name)
	}
	if ok && d.listed != nil {
		d.listed[name] = entry{info: info}
	}
}
