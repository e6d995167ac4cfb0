// Package bufpool recycles the multi-MiB part buffers of reads and uploads. A fresh buffer costs a page
// fault for each 4 KiB page the first time it is filled (2,048 for 8 MiB), and those faults took
// about 15% of s3-fuse's CPU on a sequential read (perf). A sync.Pool loses its buffers at every other garbage
// collection, and the runtime then returns their memory to the kernel, so the next buffers fault
// again; this pool keeps a bounded number of buffers for as long as the process runs.
//
// (Transparent huge pages were tried for the first use of each buffer: 4 faults instead of 2,048,
// but zeroing fresh 2 MiB pages cost more CPU than the faults saved on the benchmark VM.)
package bufpool

import "sync"

// Pool hands out buffers of one size and keeps up to idle returned ones for reuse. The buffers are
// ordinary Go memory: one that is never returned is simply collected. A nil *Pool allocates.
type Pool struct {
	size int
	idle int

	mu   sync.Mutex
	free [][]byte
}

// New returns a pool of size-byte buffers that keeps at most idle of them when they are not in use,
// which bounds the memory a pool holds on to after a burst.
func New(size, idle int) *Pool {
	return &Pool{size: size, idle: max(idle, 1)}
}

// Size is the length of the pool's buffers.
func (p *Pool) Size() int { return p.size }

// Get returns a buffer of n bytes (n <= Size, or any n for a nil pool). Its contents are undefined.
func (p *Pool) Get(n int) []byte {
	if p == nil || n > p.size {
		return make([]byte, n)
	}
	p.mu.Lock()
	if k := len(p.free); k > 0 {
		b := p.free[k-1]
		p.free[k-1] = nil
		p.free = p.free[:k-1]
		p.mu.Unlock()
		return b[:n]
	}
	p.mu.Unlock()
	return make([]byte, n, p.size)
}

// Put returns a buffer that Get handed out; nobody may use it afterwards. Other slices are ignored.
func (p *Pool) Put(b []byte) {
	if p == nil || cap(b) != p.size {
		return
	}
	p.mu.Lock()
	if len(p.free) < p.idle {
		p.free = append(p.free, b[:p.size])
	}
	p.mu.Unlock()
}

// Idle is the number of buffers waiting for reuse (for tests).
func (p *Pool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free)
}
