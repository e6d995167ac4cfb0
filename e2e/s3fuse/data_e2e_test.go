//go:build e2e

package s3fuse

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stowage-csi/stowage/e2e/s3server"
)

func randomBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func sha256File(path string) ([32]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return [32]byte{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return [32]byte{}, err
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// TestE2ELargeFileGoesThroughMultipart writes 40 MiB with 8 MiB parts and checks the object in S3 (a
// 5-part multipart ETag, same sha256) and through a fresh mount.
func TestE2ELargeFileGoesThroughMultipart(t *testing.T) {
	srv := s3server.Start(t)
	ctx := context.Background()
	bucket := newBucket(t, srv)
	m := mountBucket(t, srv, bucket, "--write-part-size", "8388608")
	data := randomBytes(40<<20, 40)
	want := sha256.Sum256(data)
	f, err := os.Create(filepath.Join(m.Dir, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	// Odd-sized writes, so parts are cut from several writes.
	for off := 0; off < len(data); off += 300_000 {
		if _, err := f.Write(data[off:min(off+300_000, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close (completes the upload): %v", err)
	}
	head, err := srv.Client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: strPtr("big.bin")})
	if err != nil {
		t.Fatal(err)
	}
	if etag := *head.ETag; !strings.HasSuffix(strings.Trim(etag, `"`), "-5") {
		t.Errorf("ETag %s: want a 5-part multipart upload", etag)
	}
	got, err := srv.GetObject(ctx, bucket, "big.bin")
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != want {
		t.Fatal("object in S3 differs from what was written")
	}
	fresh := mountBucket(t, srv, bucket)
	sum, err := sha256File(filepath.Join(fresh.Dir, "big.bin"))
	if err != nil || sum != want {
		t.Fatalf("read through a new mount: sha256 mismatch (err %v)", err)
	}
}

func strPtr(s string) *string { return &s }

// TestE2EConcurrentReaders reads one 32 MiB object from 8 goroutines at once, plus 8 small objects in
// parallel, all compared by sha256.
func TestE2EConcurrentReaders(t *testing.T) {
	srv := s3server.Start(t)
	ctx := context.Background()
	bucket := newBucket(t, srv)
	big := randomBytes(32<<20, 32)
	if err := srv.PutObject(ctx, bucket, "shared.bin", big); err != nil {
		t.Fatal(err)
	}
	small := map[string][]byte{}
	for i := 0; i < 8; i++ {
		key := fmt.Sprintf("small/%d.bin", i)
		small[key] = randomBytes(300_000+i, int64(i))
		if err := srv.PutObject(ctx, bucket, key, small[key]); err != nil {
			t.Fatal(err)
		}
	}
	m := mountBucket(t, srv, bucket)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	check := func(key string, want []byte) {
		defer wg.Done()
		sum, err := sha256File(filepath.Join(m.Dir, key))
		if err != nil {
			errs <- err
		} else if sum != sha256.Sum256(want) {
			errs <- fmt.Errorf("%s: sha256 mismatch", key)
		}
	}
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go check("shared.bin", big)
	}
	for key, want := range small {
		wg.Add(1)
		go check(key, want)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestE2EListsTenThousandObjects lists a directory of 10,000 objects (10 ListObjectsV2 pages) and a
// nested layout completely.
func TestE2EListsTenThousandObjects(t *testing.T) {
	srv := s3server.Start(t)
	ctx := context.Background()
	bucket := newBucket(t, srv)
	const n = 10000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("many/obj-%05d", i)
	}
	// The fixtures are written straight into versitygw's posix backend; a few go through PutObject.
	for _, k := range keys {
		if err := srv.WriteFixture(bucket, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	extra := []string{"many/sub1/a", "many/sub2/b", "top.txt"}
	if err := srv.PutObjects(ctx, bucket, extra, func(i int) []byte { return []byte(extra[i]) }, 3); err != nil {
		t.Fatal(err)
	}
	m := mountBucket(t, srv, bucket)
	ents, err := os.ReadDir(filepath.Join(m.Dir, "many"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	dirs := 0
	for _, e := range ents {
		names = append(names, e.Name())
		if e.IsDir() {
			dirs++
		}
	}
	if len(names) != n+2 || dirs != 2 {
		t.Fatalf("listed %d entries (%d directories), want %d and 2", len(names), dirs, n+2)
	}
	if !sort.StringsAreSorted(names) {
		t.Error("listing not in lexicographic order")
	}
	for i := 0; i < n; i++ {
		if names[i] != fmt.Sprintf("obj-%05d", i) {
			t.Fatalf("entry %d = %s", i, names[i])
		}
	}
	// stat of every entry after the listing (what ls -l does) sees the right sizes.
	for _, name := range []string{"obj-00000", "obj-04999", "obj-09999"} {
		st, err := os.Stat(filepath.Join(m.Dir, "many", name))
		if err != nil || st.Size() != int64(len("many/"+name)) {
			t.Errorf("stat %s: %v, size %v", name, err, st)
		}
	}
}

// TestE2EPrefixMountsASubtree mounts --prefix a/b/: only keys below it are visible, and new files land
// below it.
func TestE2EPrefixMountsASubtree(t *testing.T) {
	srv := s3server.Start(t)
	ctx := context.Background()
	bucket := newBucket(t, srv)
	for _, k := range []string{"a/b/one.txt", "a/b/c/two.txt", "a/other.txt", "root.txt"} {
		if err := srv.PutObject(ctx, bucket, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	m := mountBucket(t, srv, bucket, "--prefix", "a/b/")
	ents, err := os.ReadDir(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, ","); got != "c,one.txt" {
		t.Errorf("root of --prefix a/b/ lists %q, want c,one.txt", got)
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir, "c", "two.txt")); err != nil || string(b) != "a/b/c/two.txt" {
		t.Errorf("read c/two.txt = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "root.txt")); !os.IsNotExist(err) {
		t.Errorf("key outside the prefix is visible: %v", err)
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "new.txt"), []byte("n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := srv.GetObject(ctx, bucket, "a/b/new.txt"); err != nil || string(b) != "n" {
		t.Errorf("new file not stored under the prefix: %q, %v", b, err)
	}
}

// TestE2ELocalCacheServesRepeatedReads reads an object twice with --cache and checks the cache holds
// its blocks and the bytes stay right.
func TestE2ELocalCacheServesRepeatedReads(t *testing.T) {
	srv := s3server.Start(t)
	ctx := context.Background()
	bucket := newBucket(t, srv)
	data := randomBytes(5<<20+17, 5)
	if err := srv.PutObject(ctx, bucket, "c.bin", data); err != nil {
		t.Fatal(err)
	}
	cacheDir := t.TempDir()
	m := mountBucket(t, srv, bucket, "--cache", cacheDir, "--max-cache-size", "64")
	for round := 0; round < 2; round++ {
		sum, err := sha256File(filepath.Join(m.Dir, "c.bin"))
		if err != nil || sum != sha256.Sum256(data) {
			t.Fatalf("round %d: sha256 mismatch (err %v)", round, err)
		}
	}
	var cached int64
	_ = filepath.Walk(cacheDir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			cached += info.Size()
		}
		return nil
	})
	if cached < int64(len(data)) {
		t.Errorf("cache holds %d bytes after reading a %d-byte object", cached, len(data))
	}
}

// TestE2EObjectsAreVisibleWhenCloseReturns writes files from many goroutines (so open, write and close
// run on different OS threads of one process) and checks each object is in S3 as soon as close
// returns: the upload completes on the opening process's close, not later on release.
func TestE2EObjectsAreVisibleWhenCloseReturns(t *testing.T) {
	srv := s3server.Start(t)
	ctx := context.Background()
	bucket := newBucket(t, srv)
	m := mountBucket(t, srv, bucket, "--write-part-size", "5242880")
	if err := os.Mkdir(filepath.Join(m.Dir, "close"), 0o755); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			key := fmt.Sprintf("close/%02d.bin", i)
			data := randomBytes(6<<20+i, int64(i))
			f, err := os.Create(filepath.Join(m.Dir, key))
			if err == nil {
				for off := 0; off < len(data) && err == nil; off += 256 << 10 {
					_, err = f.Write(data[off:min(off+256<<10, len(data))])
				}
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				errs <- fmt.Errorf("%s: %w", key, err)
				return
			}
			got, err := srv.GetObject(ctx, bucket, key)
			if err != nil || sha256.Sum256(got) != sha256.Sum256(data) {
				errs <- fmt.Errorf("%s not in S3 right after close: %v", key, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
