package cache_test

import (
	"bytes"
	"context"
	"math/rand"
	"testing"

	"github.com/stowage-csi/stowage/s3-mounter/internal/cache"
	"github.com/stowage-csi/stowage/s3-mounter/internal/prefetch"
	"github.com/stowage-csi/stowage/s3-mounter/internal/testutil"
)

func TestCachedBlocksAreServedFromDisk(t *testing.T) {
	f := testutil.NewFakeS3()
	data := make([]byte, 3*cache.BlockSize+100)
	rand.New(rand.NewSource(3)).Read(data)
	etag, _ := f.Store("k", data)
	obj := prefetch.Object{Key: "k", ETag: etag, Size: int64(len(data))}
	c, err := cache.New(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g := cache.Getter{Next: f, Cache: c}
	for round := 0; round < 2; round++ {
		for _, r := range []struct{ off, n int64 }{{0, 10}, {cache.BlockSize - 5, 10}, {int64(len(data)) - 50, 50}, {0, int64(len(data))}} {
			dst := make([]byte, r.n)
			if err := g.GetRange(context.Background(), obj, r.off, dst); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dst, data[r.off:r.off+r.n]) {
				t.Fatalf("round %d: range %d+%d wrong", round, r.off, r.n)
			}
		}
		if round == 0 {
			f.ResetGets()
		}
	}
	if len(f.Gets()) != 0 {
		t.Errorf("second round made %d GETs, want all from cache", len(f.Gets()))
	}
	// A new version of the object is not served from the old version's blocks.
	data2 := bytes.Repeat([]byte("n"), len(data))
	etag2, _ := f.Store("k", data2)
	dst := make([]byte, 10)
	if err := g.GetRange(context.Background(), prefetch.Object{Key: "k", ETag: etag2, Size: int64(len(data2))}, 0, dst); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, data2[:10]) {
		t.Error("new object version served stale cached bytes")
	}
}

func TestCacheStaysWithinItsBudget(t *testing.T) {
	f := testutil.NewFakeS3()
	data := make([]byte, 10*cache.BlockSize)
	etag, _ := f.Store("k", data)
	obj := prefetch.Object{Key: "k", ETag: etag, Size: int64(len(data))}
	c, err := cache.New(t.TempDir(), 4*cache.BlockSize)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g := cache.Getter{Next: f, Cache: c}
	for b := int64(0); b < 10; b++ {
		if err := g.GetRange(context.Background(), obj, b*cache.BlockSize, make([]byte, cache.BlockSize)); err != nil {
			t.Fatal(err)
		}
		if c.Used() > 4*cache.BlockSize {
			t.Fatalf("cache holds %d bytes, budget %d", c.Used(), 4*cache.BlockSize)
		}
	}
}
