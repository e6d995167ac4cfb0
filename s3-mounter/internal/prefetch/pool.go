package prefetch

import "sync"

// BufferPool recycles part buffers between reads and files. Fresh multi-MiB buffers cost page faults
// and zeroing on every part, which on a 2-core node competes with the FUSE copies for CPU.
type BufferPool struct {
	size int
	pool sync.Pool
}

// NewBufferPool returns a pool of buffers of size bytes.
func NewBufferPool(size int) *BufferPool {
	return &BufferPool{size: size}
}

// get returns a buffer of n bytes, pooled when n fits.
func (b *BufferPool) get(n int) []byte {
	if b == nil || n > b.size {
		return make([]byte, n)
	}
	if v, ok := b.pool.Get().(*[]byte); ok {
		return (*v)[:n]
	}
	return make([]byte, n, b.size)
}

// put returns a buffer obtained from get.
func (b *BufferPool) put(buf []byte) {
	if b == nil || cap(buf) != b.size {
		return
	}
	buf = buf[:b.size]
	b.pool.Put(&buf)
}

// Data is the result of a read: the bytes, in one or more slices of part buffers. Release must be
// called once the bytes have been consumed (sent to the kernel); until then the buffers are not
// reused. Not calling it only costs the recycling.
type Data struct {
	Chunks [][]byte
	once   sync.Once
	r      *Reader
	parts  []*part
}

// Len returns the number of bytes.
func (d *Data) Len() int {
	n := 0
	for _, c := range d.Chunks {
		n += len(c)
	}
	return n
}

// Release hands the part buffers back. Safe to call more than once and on a nil Data.
func (d *Data) Release() {
	if d == nil {
		return
	}
	d.once.Do(func() {
		for _, p := range d.parts {
			d.r.unref(p)
		}
	})
}
