// Package upload turns a sequential stream of writes into an S3 object: data is cut into parts that are
// uploaded in the background while the writer continues (multipart), or sent with one PutObject when
// the file ends before the first part is full.
package upload

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"syscall"

	"github.com/stowage-csi/stowage/s3-mounter/internal/bufpool"
)

// Client is the subset of S3 an upload needs. Every upload carries the CRC32C of its data (sum), as
// Mountpoint's default --upload-checksums crc32c does: the server checks the bytes it received.
type Client interface {
	Put(ctx context.Context, key string, data []byte, sum uint32) (string, error)
	CreateMultipart(ctx context.Context, key string) (string, error)
	UploadPart(ctx context.Context, key, uploadID string, n int32, data []byte, sum uint32) (string, error)
	CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part) (string, error)
	AbortMultipart(ctx context.Context, key, uploadID string) error
}

// Part is one uploaded part: its ETag and the CRC32C of its data.
type Part struct {
	ETag   string
	CRC32C uint32
}

// Castagnoli is the CRC32C table; the crc32 package computes it with the CPU's CRC instruction.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MaxParts is S3's limit on parts per upload.
const MaxParts = 10000

// ErrOutOfOrder is returned for a write that does not continue where the previous one ended; like
// Mountpoint, the upload is aborted and the errno is EINVAL.
var ErrOutOfOrder = fmt.Errorf("out of order write: %w", syscall.EINVAL)

// ErrFinished is returned for writes after the upload was completed or aborted.
var ErrFinished = fmt.Errorf("upload already finished: %w", syscall.EBADF)

// Upload is one object being written. Methods are safe for concurrent use.
type Upload struct {
	client      Client
	pool        *bufpool.Pool
	key         string
	partSize    int
	concurrency int

	// ctx lives as long as the upload; Abort cancels parts in flight.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	written int64
	buf     []byte
	// sum is the CRC32C of buf, updated as data is appended (while it is still in the CPU's cache).
	sum      uint32
	uploadID string
	nextPart int32
	parts    []Part
	inflight sync.WaitGroup
	sem      chan struct{}
	err      error
	done     bool
	etag     string
}

// New starts an upload of key; nothing is sent until the first part is full or Complete is called.
// Part buffers come from pool, whose buffers must hold partSize bytes (nil: allocated).
func New(ctx context.Context, c Client, key string, partSize, concurrency int, pool *bufpool.Pool) *Upload {
	if concurrency < 1 {
		concurrency = 1
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &Upload{
		client: c, key: key, partSize: partSize, concurrency: concurrency, pool: pool,
		ctx: ctx, cancel: cancel, sem: make(chan struct{}, concurrency),
	}
}

// Written returns the number of bytes accepted so far.
func (u *Upload) Written() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.written
}

// Finished reports whether Complete or Abort ran.
func (u *Upload) Finished() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.done
}

// WriteAt appends data, which must start at the current end of the object. Full parts are handed to
// background uploads; when concurrency uploads are in flight the writer waits (backpressure).
func (u *Upload) WriteAt(data []byte, off int64) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done {
		return 0, ErrFinished
	}
	if u.err != nil {
		return 0, u.err
	}
	if off != u.written {
		u.failLocked(fmt.Errorf("%w: expected offset %d, got %d", ErrOutOfOrder, u.written, off))
		return 0, u.err
	}
	n := 0
	for len(data) > 0 {
		if u.buf == nil {
			u.buf = u.pool.Get(u.partSize)[:0]
		}
		c := min(len(data), u.partSize-len(u.buf))
		u.buf = append(u.buf, data[:c]...)
		u.sum = crc32.Update(u.sum, Castagnoli, data[:c])
		data = data[c:]
		n += c
		u.written += int64(c)
		if len(u.buf) == u.partSize {
			if err := u.sendPartLocked(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// sendPartLocked starts the upload of the buffered part. Called with u.mu held; it releases the lock
// while waiting for a free upload slot so that failures of earlier parts can be recorded.
func (u *Upload) sendPartLocked() error {
	if u.uploadID == "" {
		id, err := u.client.CreateMultipart(u.ctx, u.key)
		if err != nil {
			u.failLocked(fmt.Errorf("create multipart upload for %s: %w", u.key, err))
			return u.err
		}
		u.uploadID = id
	}
	if u.nextPart >= MaxParts {
		u.failLocked(fmt.Errorf("object %s exceeds %d parts of %d bytes: %w", u.key, MaxParts, u.partSize, syscall.EFBIG))
		return u.err
	}
	data, sum := u.buf, u.sum
	u.buf, u.sum = nil, 0
	u.nextPart++
	num := u.nextPart
	u.parts = append(u.parts, Part{CRC32C: sum})
	u.mu.Unlock()
	u.sem <- struct{}{}
	u.mu.Lock()
	if u.err != nil {
		<-u.sem
		return u.err
	}
	u.inflight.Add(1)
	id := u.uploadID
	go func() {
		defer u.inflight.Done()
		defer func() { <-u.sem }()
		etag, err := u.client.UploadPart(u.ctx, u.key, id, num, data, sum)
		u.pool.Put(data)
		u.mu.Lock()
		defer u.mu.Unlock()
		if err != nil {
			if u.err == nil {
				u.err = fmt.Errorf("upload part %d of %s: %w", num, u.key, err)
			}
			return
		}
		u.parts[num-1].ETag = etag
	}()
	return nil
}

// Complete uploads what is buffered, waits for every part and makes the object visible. It returns the
// new object's ETag. Calling it again returns the first result.
func (u *Upload) Complete() (string, error) {
	u.mu.Lock()
	if u.done {
		defer u.mu.Unlock()
		return u.etag, u.err
	}
	if u.err != nil {
		u.mu.Unlock()
		u.Abort()
		return "", u.Err()
	}
	if u.uploadID == "" {
		// Smaller than one part: a single PutObject.
		data, sum := u.buf, u.sum
		u.buf, u.sum = nil, 0
		u.mu.Unlock()
		etag, err := u.client.Put(u.ctx, u.key, data, sum)
		u.mu.Lock()
		defer u.mu.Unlock()
		u.done = true
		if err != nil {
			u.err = fmt.Errorf("put %s: %w", u.key, err)
			return "", u.err
		}
		u.etag = etag
		return etag, nil
	}
	if len(u.buf) > 0 {
		if err := u.sendPartLocked(); err != nil {
			u.mu.Unlock()
			u.Abort()
			return "", u.Err()
		}
	}
	u.mu.Unlock()
	u.inflight.Wait()
	u.mu.Lock()
	if u.err != nil {
		u.mu.Unlock()
		u.Abort()
		return "", u.Err()
	}
	parts := append([]Part(nil), u.parts...)
	id := u.uploadID
	u.mu.Unlock()
	etag, err := u.client.CompleteMultipart(u.ctx, u.key, id, parts)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.done = true
	if err != nil {
		u.err = fmt.Errorf("complete multipart upload of %s: %w", u.key, err)
		_ = u.client.AbortMultipart(context.WithoutCancel(u.ctx), u.key, id)
		return "", u.err
	}
	u.etag = etag
	return etag, nil
}

// Abort stops the upload and removes uploaded parts. Nothing becomes visible.
func (u *Upload) Abort() {
	u.mu.Lock()
	if u.done && u.uploadID == "" {
		u.mu.Unlock()
		return
	}
	u.done = true
	id := u.uploadID
	u.uploadID = ""
	u.mu.Unlock()
	u.cancel()
	u.inflight.Wait()
	if id != "" {
		_ = u.client.AbortMultipart(context.Background(), u.key, id)
	}
	u.mu.Lock()
	if u.err == nil {
		u.err = errAborted
	}
	u.mu.Unlock()
}

// Err returns the error that stopped the upload, if any.
func (u *Upload) Err() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

var errAborted = errors.New("upload aborted")

func (u *Upload) failLocked(err error) {
	if u.err == nil {
		u.err = err
	}
}
