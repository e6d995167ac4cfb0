package bufpool

import (
	"testing"
	"unsafe"
)

func TestGetReturnsRequestedLengthAndReusesReturnedBuffers(t *testing.T) {
	const size = 4 << 20
	p := New(size, 2)
	a := p.Get(size)
	if len(a) != size || cap(a) != size {
		t.Fatalf("Get(%d): len %d cap %d", size, len(a), cap(a))
	}
	a[0], a[size-1] = 1, 2
	p.Put(a)
	b := p.Get(100)
	if len(b) != 100 || unsafe.SliceData(b) != unsafe.SliceData(a) {
		t.Fatalf("Get after Put did not reuse the returned buffer (len %d)", len(b))
	}
}

func TestPutKeepsAtMostIdleBuffers(t *testing.T) {
	p := New(1<<20, 2)
	bufs := [][]byte{p.Get(1 << 20), p.Get(1 << 20), p.Get(1 << 20)}
	for _, b := range bufs {
		p.Put(b)
	}
	if got := p.Idle(); got != 2 {
		t.Fatalf("idle buffers = %d, want 2", got)
	}
}

func TestForeignAndOversizedBuffers(t *testing.T) {
	p := New(1<<20, 4)
	p.Put(make([]byte, 10)) // not from the pool: ignored
	if got := p.Idle(); got != 0 {
		t.Fatalf("foreign buffer kept: idle = %d", got)
	}
	if b := p.Get(2 << 20); len(b) != 2<<20 {
		t.Fatalf("oversized Get: len %d", len(b))
	}
	var nilPool *Pool
	if b := nilPool.Get(5); len(b) != 5 {
		t.Fatalf("nil pool Get: len %d", len(b))
	}
	nilPool.Put(make([]byte, 5))
}
