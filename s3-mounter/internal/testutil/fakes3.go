// Package testutil holds s3-mounter's shared test helpers: an in-memory S3 with request counters and
// fault injection, for unit tests that need no server.
package testutil

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/aws/smithy-go"

	"github.com/stowage-csi/stowage/s3-mounter/internal/prefetch"
	"github.com/stowage-csi/stowage/s3-mounter/internal/s3client"
	"github.com/stowage-csi/stowage/s3-mounter/internal/upload"
)

// Range is one ranged GET seen by the fake.
type Range struct {
	Off, Len int64
}

// FakeS3 is an in-memory bucket implementing the calls s3-fuse makes.
type FakeS3 struct {
	mu      sync.Mutex
	objects map[string][]byte
	uploads map[string]map[int32][]byte
	nextID  int

	// gets records every ranged GET in order (GetRange and GetStream alike).
	gets []Range
	// Streams counts GetStream calls; StreamFailAfter > 0 breaks the next stream after that many bytes.
	Streams, StreamFailAfter int64
	// Puts, Parts, Completes and Aborts count write calls.
	Puts, Parts, Completes, Aborts int
	// PartSizes records the size of each uploaded part by part number.
	PartSizes map[int32]int
	// FailPart makes UploadPart with this number fail (0 = never).
	FailPart int32
	// PartHook, if set, runs at the start of every UploadPart, outside the fake's lock, so a test can
	// hold parts in flight until it has seen what it waits for; an error fails the part.
	PartHook func(ctx context.Context, n int32) error
	// AbortHook, if set, runs at the start of every AbortMultipart, outside the fake's lock; an error
	// fails the call.
	AbortHook func(ctx context.Context) error
	// inflightParts and MaxInflightParts measure upload concurrency.
	inflightParts, MaxInflightParts int
}

// NewFakeS3 returns an empty bucket.
func NewFakeS3() *FakeS3 {
	return &FakeS3{objects: map[string][]byte{}, uploads: map[string]map[int32][]byte{}}
}

func apiErr(code string) error {
	return &smithy.GenericAPIError{Code: code, Message: code}
}

func etagOf(b []byte) string {
	s := md5.Sum(b)
	return `"` + hex.EncodeToString(s[:]) + `"`
}

// Object returns a stored object's bytes.
func (f *FakeS3) Object(key string) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.objects[key]
	return b, ok
}

// Gets returns the ranged GETs seen so far, in order.
func (f *FakeS3) Gets() []Range {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Range(nil), f.gets...)
}

// ResetGets forgets the GETs seen so far.
func (f *FakeS3) ResetGets() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets = nil
}

// PendingUploads counts multipart uploads neither completed nor aborted.
func (f *FakeS3) PendingUploads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.uploads)
}

// Head implements the filesystem's Head.
func (f *FakeS3) Head(_ context.Context, key string) (s3client.ObjectInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.objects[key]
	if !ok {
		return s3client.ObjectInfo{}, apiErr("NotFound")
	}
	return s3client.ObjectInfo{Key: key, Size: int64(len(b)), ETag: etagOf(b)}, nil
}

// List returns keys under prefix, grouped at delimiter, maxKeys (default 1000) per page.
func (f *FakeS3) List(_ context.Context, prefix, delimiter, token string, maxKeys int32) (s3client.ListPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if maxKeys <= 0 {
		maxKeys = 1000
	}
	var keys []string
	for k := range f.objects {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var page s3client.ListPage
	seen := map[string]bool{}
	n := int32(0)
	last := ""
	for _, k := range keys {
		item := k
		if delimiter != "" {
			if i := strings.Index(k[len(prefix):], delimiter); i >= 0 {
				item = k[:len(prefix)+i+len(delimiter)]
			}
		}
		if item <= token || seen[item] {
			continue
		}
		if n == maxKeys {
			page.Next = last
			return page, nil
		}
		seen[item] = true
		last = item
		n++
		if item != k {
			page.Prefixes = append(page.Prefixes, item)
		} else {
			page.Objects = append(page.Objects, s3client.ObjectInfo{Key: k, Size: int64(len(f.objects[k])), ETag: etagOf(f.objects[k])})
		}
	}
	return page, nil
}

// GetRange implements prefetch.Getter.
func (f *FakeS3) GetRange(_ context.Context, obj prefetch.Object, off int64, dst []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets = append(f.gets, Range{off, int64(len(dst))})
	b, ok := f.objects[obj.Key]
	if !ok {
		return apiErr("NoSuchKey")
	}
	if obj.ETag != "" && obj.ETag != etagOf(b) {
		return apiErr("PreconditionFailed")
	}
	if off+int64(len(dst)) > int64(len(b)) {
		return apiErr("InvalidRange")
	}
	copy(dst, b[off:])
	return nil
}

// GetStream returns bytes [off, off+n) as a stream, like GetRange (and logged with it). With
// StreamFailAfter > 0 the stream breaks after that many bytes.
func (f *FakeS3) GetStream(ctx context.Context, obj prefetch.Object, off, n int64) (io.ReadCloser, error) {
	dst := make([]byte, n)
	if err := f.GetRange(ctx, obj, off, dst); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Streams++
	var r io.Reader = bytes.NewReader(dst)
	if f.StreamFailAfter > 0 && f.StreamFailAfter < n {
		r = io.MultiReader(bytes.NewReader(dst[:f.StreamFailAfter]), errReader{apiErr("InternalError")})
		f.StreamFailAfter = 0
	}
	return io.NopCloser(r), nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// Put stores an object.
func (f *FakeS3) Put(_ context.Context, key string, data []byte, sum uint32) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if crc32.Checksum(data, upload.Castagnoli) != sum {
		return "", apiErr("BadDigest")
	}
	f.Puts++
	f.objects[key] = append([]byte(nil), data...)
	return etagOf(data), nil
}

// Store puts an object as a test's setup step and returns its ETag.
func (f *FakeS3) Store(key string, data []byte) (string, error) {
	return f.Put(context.Background(), key, data, crc32.Checksum(data, upload.Castagnoli))
}

// CreateMultipart starts an upload.
func (f *FakeS3) CreateMultipart(_ context.Context, key string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	id := fmt.Sprintf("%s#%d", key, f.nextID)
	f.uploads[id] = map[int32][]byte{}
	return id, nil
}

// UploadPart stores a part, after PartHook, failing part FailPart.
func (f *FakeS3) UploadPart(ctx context.Context, _, id string, n int32, data []byte, sum uint32) (string, error) {
	f.mu.Lock()
	f.inflightParts++
	f.MaxInflightParts = max(f.MaxInflightParts, f.inflightParts)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflightParts--
		f.mu.Unlock()
	}()
	if f.PartHook != nil {
		if err := f.PartHook(ctx, n); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n == f.FailPart {
		return "", apiErr("InternalError")
	}
	if crc32.Checksum(data, upload.Castagnoli) != sum {
		return "", apiErr("BadDigest")
	}
	parts, ok := f.uploads[id]
	if !ok {
		return "", apiErr("NoSuchUpload")
	}
	f.Parts++
	if f.PartSizes == nil {
		f.PartSizes = map[int32]int{}
	}
	f.PartSizes[n] = len(data)
	parts[n] = append([]byte(nil), data...)
	return etagOf(data), nil
}

// CompleteMultipart joins the parts named by their ETags and checksums (part i+1 = parts[i]).
func (f *FakeS3) CompleteMultipart(_ context.Context, key, id string, etags []upload.Part) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	parts, ok := f.uploads[id]
	if !ok {
		return "", apiErr("NoSuchUpload")
	}
	var all []byte
	for i, e := range etags {
		p, ok := parts[int32(i+1)]
		if !ok || etagOf(p) != e.ETag || crc32.Checksum(p, upload.Castagnoli) != e.CRC32C {
			return "", apiErr("InvalidPart")
		}
		all = append(all, p...)
	}
	delete(f.uploads, id)
	f.Completes++
	f.objects[key] = all
	return fmt.Sprintf(`"%x-%d"`, md5.Sum(all), len(etags)), nil
}

// AbortMultipart drops an upload, after AbortHook.
func (f *FakeS3) AbortMultipart(ctx context.Context, _, id string) error {
	if f.AbortHook != nil {
		if err := f.AbortHook(ctx); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Aborts++
	delete(f.uploads, id)
	return nil
}

// Delete removes an object.
func (f *FakeS3) Delete(_ context.Context, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.objects, key)
	return nil
}
