package upload_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/s3-mounter/internal/bufpool"
	"github.com/stowage-csi/stowage/s3-mounter/internal/testutil"
	"github.com/stowage-csi/stowage/s3-mounter/internal/upload"
)

// partSize is small: the fake enforces no minimum, and the tests check how data is cut, not S3's limits.
const partSize = 64 << 10

func payload(n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(int64(n))).Read(b)
	return b
}

func writeAll(t *testing.T, u *upload.Upload, data []byte, chunk int) {
	t.Helper()
	for off := 0; off < len(data); off += chunk {
		end := min(off+chunk, len(data))
		if n, err := u.WriteAt(data[off:end], int64(off)); err != nil || n != end-off {
			t.Fatalf("WriteAt(%d): n=%d err=%v", off, n, err)
		}
	}
}

func TestUploadPartsAndPut(t *testing.T) {
	tests := []struct {
		name      string
		size      int
		wantPuts  int
		wantParts []int
	}{
		{"empty file is one put", 0, 1, nil},
		{"small file is one put", 1000, 1, nil},
		{"one byte under a part is one put", partSize - 1, 1, nil},
		{"exactly one part is multipart", partSize, 0, []int{partSize}},
		{"parts plus a tail", 2*partSize + 7, 0, []int{partSize, partSize, 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := testutil.NewFakeS3()
			u := upload.New(context.Background(), f, "obj", upload.Config{PartSize: partSize, Concurrency: 2})
			data := payload(tc.size)
			writeAll(t, u, data, partSize/3)
			if _, err := u.Complete(); err != nil {
				t.Fatal(err)
			}
			got, ok := f.Object("obj")
			if !ok || !bytes.Equal(got, data) {
				t.Fatalf("stored object differs (ok=%v, %d bytes, want %d)", ok, len(got), len(data))
			}
			if f.Puts != tc.wantPuts {
				t.Errorf("puts = %d, want %d", f.Puts, tc.wantPuts)
			}
			if len(f.PartSizes) != len(tc.wantParts) {
				t.Fatalf("part sizes %v, want %v", f.PartSizes, tc.wantParts)
			}
			for i := range tc.wantParts {
				if f.PartSizes[int32(i+1)] != tc.wantParts[i] {
					t.Errorf("part sizes %v, want %v", f.PartSizes, tc.wantParts)
				}
			}
		})
	}
}

func TestPartsUploadWhileWritingWithBoundedConcurrency(t *testing.T) {
	const concurrency = 3
	f := testutil.NewFakeS3()
	// The first parts wait until all of them are in flight together: the upload must run them in
	// parallel while the writer goes on, or they fail at the guard.
	var mu sync.Mutex
	started := 0
	together := make(chan struct{})
	f.PartHook = func(ctx context.Context, n int32) error {
		mu.Lock()
		if started++; started == concurrency {
			close(together)
		}
		mu.Unlock()
		if n > concurrency {
			return nil
		}
		select {
		case <-together:
			return nil
		case <-time.After(guard):
			return errors.New("parts did not run concurrently")
		}
	}
	u := upload.New(context.Background(), f, "obj", upload.Config{PartSize: partSize, Concurrency: concurrency, Pool: bufpool.New(partSize, concurrency+1)})
	data := payload(2*concurrency*partSize + 10)
	writeAll(t, u, data, partSize/3)
	if _, err := u.Complete(); err != nil {
		t.Fatal(err)
	}
	if f.MaxInflightParts != concurrency {
		t.Errorf("max parts in flight = %d, want %d", f.MaxInflightParts, concurrency)
	}
	if got, _ := f.Object("obj"); !bytes.Equal(got, data) {
		t.Fatal("stored object differs")
	}
}

func TestOutOfOrderWriteIsEINVALAndAbortsTheUpload(t *testing.T) {
	f := testutil.NewFakeS3()
	u := upload.New(context.Background(), f, "obj", upload.Config{PartSize: partSize, Concurrency: 2})
	writeAll(t, u, payload(partSize+10), 4096)
	_, err := u.WriteAt([]byte("x"), 5)
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("out-of-order write: %v, want EINVAL", err)
	}
	if _, err := u.Complete(); err == nil {
		t.Fatal("Complete after an out-of-order write succeeded")
	}
	if _, ok := f.Object("obj"); ok {
		t.Error("object became visible after a failed upload")
	}
	if f.PendingUploads() != 0 || f.Aborts == 0 {
		t.Errorf("multipart upload not aborted (pending %d, aborts %d)", f.PendingUploads(), f.Aborts)
	}
}

func TestFailedPartFailsCompleteAndAborts(t *testing.T) {
	f := testutil.NewFakeS3()
	f.FailPart = 2
	u := upload.New(context.Background(), f, "obj", upload.Config{PartSize: partSize, Concurrency: 2})
	data := payload(3 * partSize)
	const chunk = partSize / 4
	for off := 0; off < len(data); off += chunk {
		if _, err := u.WriteAt(data[off:off+chunk], int64(off)); err != nil {
			break // the failure may surface on a later write
		}
	}
	_, err := u.Complete()
	if err == nil {
		t.Fatal("Complete succeeded although part 2 failed")
	}
	if f.PendingUploads() != 0 {
		t.Error("failed upload left a pending multipart upload")
	}
	if _, ok := f.Object("obj"); ok {
		t.Error("object visible after a failed upload")
	}
}

// TestACompletedUploadStaysCompleted: writes after Complete are refused, and neither a second Complete
// nor an Abort (s3-fuse aborts after any failed write) changes the result or touches the object.
func TestACompletedUploadStaysCompleted(t *testing.T) {
	for _, size := range []int{5, 2*partSize + 5} {
		t.Run(fmt.Sprintf("%d bytes", size), func(t *testing.T) {
			f := testutil.NewFakeS3()
			u := upload.New(context.Background(), f, "obj", upload.Config{PartSize: partSize, Concurrency: 2})
			data := payload(size)
			writeAll(t, u, data, partSize/3)
			etag1, err := u.Complete()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := u.WriteAt([]byte("x"), int64(size)); !errors.Is(err, syscall.EBADF) {
				t.Errorf("write after complete: %v, want EBADF", err)
			}
			u.Abort()
			if etag2, err := u.Complete(); err != nil || etag1 != etag2 {
				t.Errorf("Complete after Abort = %q, %v; want the first result %q", etag2, err, etag1)
			}
			if err := u.Err(); err != nil {
				t.Errorf("Err() = %v after a successful Complete", err)
			}
			if got, ok := f.Object("obj"); !ok || !bytes.Equal(got, data) {
				t.Error("stored object differs after Abort of a completed upload")
			}
			if f.Aborts != 0 || f.Puts+f.Completes != 1 {
				t.Errorf("aborts %d, puts %d, completes %d; want one put or complete and no abort", f.Aborts, f.Puts, f.Completes)
			}
		})
	}
}
