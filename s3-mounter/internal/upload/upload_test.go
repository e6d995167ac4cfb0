package upload_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"syscall"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/s3-mounter/internal/bufpool"
	"github.com/stowage-csi/stowage/s3-mounter/internal/testutil"
	"github.com/stowage-csi/stowage/s3-mounter/internal/upload"
)

const partSize = 5 << 20

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
			u := upload.New(context.Background(), f, "obj", partSize, 2, nil)
			data := payload(tc.size)
			writeAll(t, u, data, 128<<10)
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
	f := testutil.NewFakeS3()
	f.PartDelay = 50 * time.Millisecond
	u := upload.New(context.Background(), f, "obj", partSize, 3, bufpool.New(partSize, 4))
	data := payload(10 * partSize)
	start := time.Now()
	writeAll(t, u, data, 1<<20)
	if _, err := u.Complete(); err != nil {
		t.Fatal(err)
	}
	if f.MaxInflightParts < 2 || f.MaxInflightParts > 3 {
		t.Errorf("max parts in flight = %d, want 2..3", f.MaxInflightParts)
	}
	// Ten parts of 50 ms each, three at a time: well under the 500 ms of a serial upload.
	if el := time.Since(start); el > 450*time.Millisecond {
		t.Logf("upload took %v", el)
	}
	if got, _ := f.Object("obj"); !bytes.Equal(got, data) {
		t.Fatal("stored object differs")
	}
}

func TestOutOfOrderWriteIsEINVALAndAbortsTheUpload(t *testing.T) {
	f := testutil.NewFakeS3()
	u := upload.New(context.Background(), f, "obj", partSize, 2, nil)
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
	u := upload.New(context.Background(), f, "obj", partSize, 2, nil)
	data := payload(3 * partSize)
	for off := 0; off < len(data); off += 1 << 20 {
		if _, err := u.WriteAt(data[off:off+1<<20], int64(off)); err != nil {
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

func TestWritesAfterCompleteAreRefused(t *testing.T) {
	f := testutil.NewFakeS3()
	u := upload.New(context.Background(), f, "obj", partSize, 2, nil)
	writeAll(t, u, []byte("hello"), 5)
	etag1, err := u.Complete()
	if err != nil {
		t.Fatal(err)
	}
	etag2, err := u.Complete()
	if err != nil || etag1 != etag2 {
		t.Errorf("second Complete = %q, %v; want the first result %q", etag2, err, etag1)
	}
	if _, err := u.WriteAt([]byte("x"), 5); !errors.Is(err, syscall.EBADF) {
		t.Errorf("write after complete: %v, want EBADF", err)
	}
	if f.Puts != 1 {
		t.Errorf("puts = %d, want 1", f.Puts)
	}
}
