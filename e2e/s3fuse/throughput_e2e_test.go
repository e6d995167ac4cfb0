//go:build e2e

package s3fuse

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/s3server"
)

// TestE2EThroughputCap checks that --maximum-throughput-gbps caps transfers (Mountpoint only sizes its
// connection pool from it, so users who set it to stay under a figure did not: mountpoint-s3#961).
// 12 MiB at 0.08 Gbps (10 MB/s, after a 1 MiB burst) cannot move in less than 1.15 s either way; the
// check is a lower bound, which a slow machine cannot fail.
func TestE2EThroughputCap(t *testing.T) {
	srv := s3server.Start(t)
	bucket := newBucket(t, srv)
	const size = 12 << 20
	data := randomBytes(size, 12)
	floor := time.Duration(float64(size-(1<<20)) / 10e6 * float64(time.Second))

	m := mountBucket(t, srv, bucket, "--maximum-throughput-gbps", "0.08")
	start := time.Now()
	if err := os.WriteFile(filepath.Join(m.Dir, "capped.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < floor {
		t.Errorf("wrote 12 MiB in %v under a 10 MB/s cap; the floor is %v", took, floor)
	}

	m = mountBucket(t, srv, bucket, "--maximum-throughput-gbps", "0.08")
	start = time.Now()
	got, err := os.ReadFile(filepath.Join(m.Dir, "capped.bin"))
	took := time.Since(start)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, err %v; want the 12 MiB written", len(got), err)
	}
	if took < floor {
		t.Errorf("read 12 MiB in %v under a 10 MB/s cap; the floor is %v", took, floor)
	}
	t.Logf("12 MiB under a 10 MB/s cap: read in %v (floor %v)", took, floor)
}
