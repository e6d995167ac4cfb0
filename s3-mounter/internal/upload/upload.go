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
	"time"

	"k8s.io/klog/v2"

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

// Config sizes an upload.
type Config struct {
	// PartSize is the size of every part but the last (--write-part-size).
	PartSize int
	// Concurrency bounds the parts in flight at once; a writer that fills another part waits for a slot.
	Concurrency int
	// Pool, if set, recycles part buffers; its buffers must hold PartSize bytes.
	Pool *bufpool.Pool
	// AbortTimeout bounds the AbortMultipart that removes a failed upload's parts (DefaultAbortTimeout
	// when 0).
	AbortTimeout time.Duration
}

// DefaultAbortTimeout bounds AbortMultipart: the call only tidies the bucket, so an endpoint that does
// not answer must not hold up the close(2) or the unmount that failed the upload.
const DefaultAbortTimeout = 30 * time.Second

// Upload is one object being written. Methods are safe for concurrent use.
type Upload struct {
	client Client
	key    string
	cfg    Config

	// ctx lives as long as the upload; Abort and failures cancel parts in flight.
	ctx    context.Context
	cancel context.CancelFunc

	// writeMu is held by WriteAt and Complete for their whole run: parts are cut and started by one
	// caller at a time, and none starts while Complete waits for those in flight. Abort takes it only
	// after marking the upload finished, so it can stop a writer that waits for a slot.
	writeMu sync.Mutex

	// mu guards the fields below, which part uploads update from their own goroutines.
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
	// err is the first failure; once set the upload can only be aborted.
	err error
	// finished is set when Complete has its result or Abort begins; writes are refused from then on.
	finished bool
	etag     string
}

// New starts an upload of key; nothing is sent until the first part is full or Complete is called.
func New(ctx context.Context, c Client, key string, cfg Config) *Upload {
	cfg.Concurrency = max(cfg.Concurrency, 1)
	if cfg.AbortTimeout <= 0 {
		cfg.AbortTimeout = DefaultAbortTimeout
	}
	// The upload outlives the request that created it (a write); only Abort and failures stop it.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &Upload{client: c, key: key, cfg: cfg, ctx: ctx, cancel: cancel, sem: make(chan struct{}, cfg.Concurrency)}
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
	return u.finished
}

// Err returns the error that stopped the upload, if any.
func (u *Upload) Err() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

// refusalLocked is why the upload takes no more data: ErrFinished once Complete or Abort ran, else the
// failure that stopped it, or nil. Called with u.mu held.
func (u *Upload) refusalLocked() error {
	if u.finished {
		return ErrFinished
	}
	return u.err
}

func (u *Upload) failLocked(err error) {
	if u.err == nil {
		u.err = err
	}
}

// WriteAt appends data, which must start at the current end of the object. Full parts are handed to
// background uploads; when Concurrency uploads are in flight the writer waits (backpressure).
func (u *Upload) WriteAt(data []byte, off int64) (int, error) {
	u.writeMu.Lock()
	defer u.writeMu.Unlock()
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := u.refusalLocked(); err != nil {
		return 0, err
	}
	if off != u.written {
		u.failLocked(fmt.Errorf("%w: expected offset %d, got %d", ErrOutOfOrder, u.written, off))
		return 0, u.err
	}
	n := 0
	for len(data) > 0 {
		if u.buf == nil {
			u.buf = u.cfg.Pool.Get(u.cfg.PartSize)[:0]
		}
		c := min(len(data), u.cfg.PartSize-len(u.buf))
		u.buf = append(u.buf, data[:c]...)
		u.sum = crc32.Update(u.sum, Castagnoli, data[:c])
		data = data[c:]
		n += c
		u.written += int64(c)
		if len(u.buf) == u.cfg.PartSize {
			if err := u.sendPartLocked(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// sendPartLocked starts the upload of the buffered part. Called with u.writeMu and u.mu held; it
// releases u.mu while waiting for a free upload slot, so that parts in flight can record their result
// and Abort can stop the upload meanwhile.
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
		u.failLocked(fmt.Errorf("object %s exceeds %d parts of %d bytes: %w", u.key, MaxParts, u.cfg.PartSize, syscall.EFBIG))
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
	// The wait let others in: a part may have failed, or Abort may have finished the upload.
	if err := u.refusalLocked(); err != nil {
		<-u.sem
		u.cfg.Pool.Put(data)
		return err
	}
	u.inflight.Add(1)
	go u.uploadPart(u.uploadID, num, data, sum)
	return nil
}

// uploadPart sends one part and records its ETag, or the first failure.
func (u *Upload) uploadPart(id string, num int32, data []byte, sum uint32) {
	defer u.inflight.Done()
	defer func() { <-u.sem }()
	etag, err := u.client.UploadPart(u.ctx, u.key, id, num, data, sum)
	u.cfg.Pool.Put(data)
	u.mu.Lock()
	defer u.mu.Unlock()
	if err != nil {
		u.failLocked(fmt.Errorf("upload part %d of %s: %w", num, u.key, err))
		return
	}
	u.parts[num-1].ETag = etag
}

// Complete uploads what is buffered, waits for every part and makes the object visible. It returns the
// new object's ETag. Calling it again returns the first result; after Abort it returns the abort's error.
func (u *Upload) Complete() (string, error) {
	u.writeMu.Lock()
	defer u.writeMu.Unlock()
	u.mu.Lock()
	if u.finished {
		defer u.mu.Unlock()
		return u.etag, u.err
	}
	if u.err != nil {
		u.mu.Unlock()
		return "", u.fail()
	}
	if u.uploadID == "" {
		// Smaller than one part: a single PutObject.
		return u.putLocked()
	}
	if len(u.buf) > 0 {
		if err := u.sendPartLocked(); err != nil {
			u.mu.Unlock()
			return "", u.fail()
		}
	}
	u.mu.Unlock()
	return u.completeMultipart()
}

// putLocked stores the buffered data with one PutObject. Called with u.writeMu and u.mu held; it
// releases u.mu.
func (u *Upload) putLocked() (string, error) {
	data, sum := u.buf, u.sum
	u.buf, u.sum = nil, 0
	u.mu.Unlock()
	etag, err := u.client.Put(u.ctx, u.key, data, sum)
	u.cfg.Pool.Put(data)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.finished = true
	if err != nil {
		u.failLocked(fmt.Errorf("put %s: %w", u.key, err))
		return "", u.err
	}
	u.etag = etag
	return etag, nil
}

// completeMultipart waits for the parts in flight and joins them into the object. Called with
// u.writeMu held.
func (u *Upload) completeMultipart() (string, error) {
	u.inflight.Wait()
	u.mu.Lock()
	if u.err != nil {
		// A part failed, or Abort began while the parts were in flight.
		u.mu.Unlock()
		return "", u.fail()
	}
	parts := append([]Part(nil), u.parts...)
	id := u.uploadID
	u.mu.Unlock()
	etag, err := u.client.CompleteMultipart(u.ctx, u.key, id, parts)
	u.mu.Lock()
	if err != nil {
		u.failLocked(fmt.Errorf("complete multipart upload of %s: %w", u.key, err))
		u.mu.Unlock()
		return "", u.fail()
	}
	defer u.mu.Unlock()
	// The multipart upload is now the object: there is nothing left for an Abort to remove, and the
	// object is there even if an Abort began meanwhile.
	u.finished, u.uploadID, u.etag, u.err = true, "", etag, nil
	return etag, nil
}

// Abort stops the upload and removes uploaded parts. Nothing becomes visible unless Complete has
// already made it so, in which case Abort does nothing.
func (u *Upload) Abort() {
	u.mu.Lock()
	if u.finished {
		u.mu.Unlock()
		return
	}
	u.finished = true
	u.failLocked(errAborted)
	u.mu.Unlock()
	// Cancelling the parts in flight frees the slot a writer may wait for, so writeMu comes free.
	u.cancel()
	u.writeMu.Lock()
	defer u.writeMu.Unlock()
	u.fail()
}

var errAborted = errors.New("upload aborted")

// fail ends a failed or aborted upload: it stops the parts in flight, waits for them and removes the
// parts already stored. It returns the upload's error. Called with u.writeMu held (no part starts
// meanwhile) and u.mu not held.
func (u *Upload) fail() error {
	u.cancel()
	u.inflight.Wait()
	u.mu.Lock()
	u.finished = true
	id := u.uploadID
	u.uploadID = ""
	u.cfg.Pool.Put(u.buf)
	u.buf = nil
	err := u.err
	u.mu.Unlock()
	if id != "" {
		u.abortMultipart(id)
	}
	return err
}

// abortMultipart removes a multipart upload's parts, within AbortTimeout: the upload's own context is
// cancelled by then, and the caller's may be too (an unmount), but the parts should still go.
func (u *Upload) abortMultipart(id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(u.ctx), u.cfg.AbortTimeout)
	defer cancel()
	if err := u.client.AbortMultipart(ctx, u.key, id); err != nil {
		klog.FromContext(u.ctx).Error(err, "Aborting a multipart upload failed; its parts stay in the bucket until a lifecycle rule removes them",
			"key", u.key, "uploadID", id)
	}
}
