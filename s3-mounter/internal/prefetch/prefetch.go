// Package prefetch serves reads of one S3 object: sequential readers get parallel ranged GETs in a
// window that doubles with each sequential read up to a maximum; a read that jumps elsewhere drops the
// window and fetches only what was asked, as Mountpoint does.
package prefetch

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/stowage-csi/stowage/s3-mounter/internal/bufpool"
)

// Object names one version of an object.
type Object struct {
	Key  string
	ETag string
	Size int64
}

// Getter fills dst with the object's bytes at off.
type Getter interface {
	GetRange(ctx context.Context, obj Object, off int64, dst []byte) error
}

// StreamGetter opens bytes [off, off+n) of the object as one stream, so that one GET can fill several
// consecutive parts.
type StreamGetter interface {
	GetStream(ctx context.Context, obj Object, off, n int64) (io.ReadCloser, error)
}

// Config sizes the window.
type Config struct {
	// PartSize is the size of one ranged GET (--read-part-size).
	PartSize int64
	// InitialWindow is how far ahead the first sequential read prefetches.
	InitialWindow int64
	// MaxWindow caps how far ahead of the reader data is requested.
	MaxWindow int64
	// Pool, if set, recycles part buffers; its buffers must hold PartSize bytes.
	Pool *bufpool.Pool
	// Stream, if set, lets one GET fill BatchParts consecutive parts once the window is at its
	// maximum: each GET costs the server and this process CPU of its own, whatever its size.
	Stream     StreamGetter
	BatchParts int
}

// DefaultConfig returns the window used for a part size and a request concurrency: start with one part,
// grow to concurrency parts.
func DefaultConfig(partSize int64, concurrency int) Config {
	if concurrency < 1 {
		concurrency = 1
	}
	return Config{PartSize: partSize, InitialWindow: partSize, MaxWindow: partSize * int64(concurrency)}
}

// part is one ranged GET, possibly in flight.
type part struct {
	off  int64
	buf  []byte
	done chan struct{}
	err  error
	// refs counts users of buf (the GET while in flight, reads until released); dropped is set once
	// the window no longer holds the part. Both are guarded by Reader.mu. The buffer is recycled
	// when both say nobody needs it.
	refs    int
	dropped bool
}

func (p *part) end() int64 { return p.off + int64(len(p.buf)) }

// Reader reads one object version. It is safe for concurrent use: the kernel issues overlapping reads
// on one handle, slightly out of order, and those count as sequential while they fall in the window.
type Reader struct {
	get  Getter
	obj  Object
	size int64
	cfg  Config

	// ctx is cancelled on Close and stops GETs still in flight; fetches counts them, so Close can wait
	// until none uses the Getter or a part buffer any more.
	ctx     context.Context
	cancel  context.CancelFunc
	fetches sync.WaitGroup

	mu sync.Mutex
	// parts are contiguous, ordered by offset; the window is [parts[0].off, fetchedTo).
	parts []*part
	// fetchedTo is the end of the last requested part.
	fetchedTo int64
	// window is how far ahead of the latest read data is kept requested.
	window int64
	// nextOff is where a sequential reader continues; a read there (re)starts prefetching.
	nextOff int64
	// sequential is set once a read continued the previous one (or started at 0).
	sequential bool
	// stats count how reads were served, for logs and tests.
	stats Stats
	// closed is set by Close: later reads start no fetches, which Close would not wait for.
	closed bool
}

// Stats counts how a reader served its reads.
type Stats struct {
	// Streamed reads came from the window; Direct reads were fetched on their own (random access).
	Streamed, Direct int
	// Parts is the number of parts the window requested; GETs is the number of ranged GETs that
	// fetched them (fewer when GETs fill several parts).
	Parts, GETs int
}

// Stats returns the reader's counters.
func (r *Reader) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// NewReader returns a reader for one object version.
func NewReader(ctx context.Context, g Getter, obj Object, cfg Config) *Reader {
	if cfg.PartSize <= 0 {
		cfg.PartSize = 8 << 20
	}
	if cfg.InitialWindow <= 0 {
		cfg.InitialWindow = cfg.PartSize
	}
	if cfg.MaxWindow < cfg.InitialWindow {
		cfg.MaxWindow = cfg.InitialWindow
	}
	ctx, cancel := context.WithCancel(ctx)
	return &Reader{get: g, obj: obj, size: obj.Size, cfg: cfg, ctx: ctx, cancel: cancel, window: cfg.InitialWindow}
}

// Close stops all prefetching and returns once the GETs in flight have ended.
func (r *Reader) Close() {
	r.cancel()
	r.mu.Lock()
	r.closed = true
	r.dropAll()
	r.mu.Unlock()
	r.fetches.Wait()
}

// Window returns the current prefetch window in bytes (for tests and logs).
func (r *Reader) Window() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.window
}

// InFlight returns the byte range currently requested ahead: [start, end).
func (r *Reader) InFlight() (int64, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.parts) == 0 {
		return r.fetchedTo, r.fetchedTo
	}
	return r.parts[0].off, r.fetchedTo
}

// ReadAt returns up to n bytes at off; fewer only at the end of the object. The caller must Release
// the result once it has consumed the bytes.
func (r *Reader) ReadAt(ctx context.Context, off int64, n int) (*Data, error) {
	if off >= r.size || n <= 0 {
		return &Data{}, nil
	}
	end := min(off+int64(n), r.size)
	parts, direct := r.plan(off, end)
	if direct {
		buf := make([]byte, end-off)
		if err := r.get.GetRange(ctx, r.obj, off, buf); err != nil {
			return nil, err
		}
		return &Data{Chunks: [][]byte{buf}}, nil
	}
	d := &Data{r: r, parts: parts}
	for _, p := range parts {
		select {
		case <-p.done:
		case <-ctx.Done():
			d.Release()
			return nil, ctx.Err()
		}
		if p.err != nil {
			r.forget(p)
			d.Release()
			return nil, p.err
		}
		lo := max(off, p.off) - p.off
		hi := min(end, p.end()) - p.off
		d.Chunks = append(d.Chunks, p.buf[lo:hi])
	}
	return d, nil
}

// plan decides how to serve [off, end): from window parts (starting GETs as needed), or, for a random
// read, directly.
func (r *Reader) plan(off, end int64) ([]*part, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.stats.Direct++
		return nil, true
	}
	inWindow := len(r.parts) > 0 && off >= r.parts[0].off && off < r.fetchedTo
	switch {
	case inWindow:
		// Part of the stream: grow the window as the reader advances.
		r.sequential = true
		r.window = min(r.window*2, r.cfg.MaxWindow)
	case off == r.nextOff || r.nearNext(off, end):
		// Continuing where the last read stopped (or the first read, from 0): stream from here. The
		// kernel sends readahead requests concurrently, so the stream may start with one that overtook
		// its predecessors; starting at the lower offset keeps those in the window.
		r.dropAll()
		r.fetchedTo = min(off, r.nextOff)
		if r.sequential {
			r.window = min(r.window*2, r.cfg.MaxWindow)
		} else {
			r.window = r.cfg.InitialWindow
		}
		r.sequential = true
	default:
		// A jump: forget the stream and fetch just what was asked.
		r.dropAll()
		r.sequential = false
		r.window = r.cfg.InitialWindow
		r.nextOff = end
		r.stats.Direct++
		return nil, true
	}
	r.stats.Streamed++
	r.nextOff = end
	// Drop parts the reader has moved past; keep one part behind for reads the kernel reordered.
	for len(r.parts) > 1 && r.parts[0].end() <= off-r.cfg.PartSize {
		r.drop(r.parts[0])
		r.parts = r.parts[1:]
	}
	// Keep window bytes requested past the end of this read. A streaming reader at the full window
	// fetches BatchParts parts per GET, which may request up to BatchParts-1 parts beyond the window.
	target := min(end+r.window, r.size)
	batch := 1
	if r.cfg.Stream != nil && r.window >= r.cfg.MaxWindow {
		batch = max(1, r.cfg.BatchParts)
	}
	for r.fetchedTo < target {
		var ps []*part
		for len(ps) < batch && r.fetchedTo < r.size {
			n := min(r.cfg.PartSize, r.size-r.fetchedTo)
			p := &part{off: r.fetchedTo, buf: r.cfg.Pool.Get(int(n)), done: make(chan struct{}), refs: 1}
			r.parts = append(r.parts, p)
			r.fetchedTo += n
			ps = append(ps, p)
		}
		r.stats.Parts += len(ps)
		r.stats.GETs++
		r.fetches.Add(1)
		if len(ps) == 1 {
			go r.fetch(ps[0])
		} else {
			go r.fetchStream(ps)
		}
	}
	var need []*part
	for _, p := range r.parts {
		if p.end() > off && p.off < end {
			p.refs++
			need = append(need, p)
		}
	}
	return need, false
}

// streamReadSize is the smallest read that may start a stream without landing exactly on nextOff:
// kernel readahead requests are large, applications' random reads are small.
const streamReadSize = 64 << 10

// nearNext reports whether [off, end) is a large read close enough to where the last read stopped to
// be part of the same sequential stream, reordered by the kernel.
func (r *Reader) nearNext(off, end int64) bool {
	slack := r.cfg.PartSize
	return end-off >= streamReadSize && off >= r.nextOff-slack && off <= r.nextOff+slack
}

func (r *Reader) fetch(p *part) {
	defer r.fetches.Done()
	p.err = r.get.GetRange(r.ctx, r.obj, p.off, p.buf)
	close(p.done)
	r.unref(p)
}

// fetchStream fills consecutive parts from one GET, handing each to its readers as soon as it is full.
// If the stream fails, the part being filled and those after it fail; a retried read refetches them.
func (r *Reader) fetchStream(ps []*part) {
	defer r.fetches.Done()
	off := ps[0].off
	var n int64
	for _, p := range ps {
		n += int64(len(p.buf))
	}
	body, err := r.cfg.Stream.GetStream(r.ctx, r.obj, off, n)
	for _, p := range ps {
		if err == nil {
			var got int
			if got, err = io.ReadFull(body, p.buf); err != nil {
				err = fmt.Errorf("read %s bytes %d-%d: got %d: %w", r.obj.Key, p.off, p.end()-1, got, err)
			}
		}
		p.err = err
		close(p.done)
		r.unref(p)
	}
	if body != nil {
		_ = body.Close()
	}
}

// unref drops one user of p's buffer.
func (r *Reader) unref(p *part) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p.refs--
	r.recycle(p)
}

// drop removes p from the window (with r.mu held).
func (r *Reader) drop(p *part) {
	p.dropped = true
	r.recycle(p)
}

// recycle returns p's buffer to the pool once nothing uses it (with r.mu held).
func (r *Reader) recycle(p *part) {
	if p.dropped && p.refs == 0 && p.buf != nil {
		r.cfg.Pool.Put(p.buf)
		p.buf = nil
	}
}

// forget drops a failed part so a retry of the read issues a new GET.
func (r *Reader) forget(bad *part) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, p := range r.parts {
		if p == bad {
			for _, q := range r.parts[i:] {
				r.drop(q)
			}
			r.parts = r.parts[:i]
			r.fetchedTo = bad.off
			return
		}
	}
}

// dropAll empties the window (with r.mu held).
func (r *Reader) dropAll() {
	for _, p := range r.parts {
		r.drop(p)
	}
	r.parts = nil
}
