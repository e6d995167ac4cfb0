package prefetch

import "sync"

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
