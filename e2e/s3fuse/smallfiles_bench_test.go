//go:build bench

package s3fuse

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stowage-csi/stowage/e2e/s3server"
)

const (
	smallCreates = 300
	smallReads   = 1000
	smallSize    = 4096
	listEntries  = 10000
)

// smallRates is one round of the small-file workloads, in operations per second.
type smallRates struct{ create, read, list, listStat float64 }

// TestBenchS3FuseSmallFiles measures small files and listings: creating 4 KiB files one after another
// (each uploaded on close), reading 4 KiB objects one after another, and listing a directory of 10,000
// objects, names only and then with a stat of every entry (ls -l). Against the SDK (PutObject,
// GetObject, ListObjectsV2 pages of 1,000: the limit), s3fs and rclone mount. Nothing is asserted
// about timing.
func TestBenchS3FuseSmallFiles(t *testing.T) {
	srv := s3server.Start(t)
	ctx := context.Background()
	bucket := newBucket(t, srv)
	payload := bytes.Repeat([]byte("small file "), smallSize/11+1)[:smallSize]
	// Fixtures go straight into versitygw's posix backend, as in TestE2EListsTenThousandObjects.
	for i := 0; i < smallReads; i++ {
		if err := srv.WriteFixture(bucket, fmt.Sprintf("small/r-%04d", i), payload); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < listEntries; i++ {
		if err := srv.WriteFixture(bucket, fmt.Sprintf("many/obj-%05d", i), payload[:16]); err != nil {
			t.Fatal(err)
		}
	}
	ensurePeers(t)
	type client struct {
		name   string
		rounds int
		run    func(t *testing.T, round int) smallRates
	}
	// Each client creates its files in a directory of its own.
	mounted := func(tag string, mount func(t *testing.T) string) func(t *testing.T, round int) smallRates {
		return func(t *testing.T, round int) smallRates {
			return smallThroughMount(t, mount, srv.Client, bucket, payload, fmt.Sprintf("new-%s-%d", tag, round))
		}
	}
	clients := []client{
		{name: "aws-sdk-go-v2 (limit)", run: func(t *testing.T, round int) smallRates {
			return smallThroughSDK(t, ctx, srv.Client, bucket, payload, round)
		}},
		{name: "s3-fuse", run: mounted("s3fuse", func(t *testing.T) string { return mountBucket(t, srv, bucket).Dir })},
		{name: "s3fs 1.90", run: mounted("s3fs", func(t *testing.T) string { d, _ := mountS3fs(t, srv, bucket); return d })},
		{name: rcloneOff, rounds: 1, run: mounted("rclone-off", func(t *testing.T) string { d, _ := mountRclone(t, srv, bucket, "off"); return d })},
		{name: rcloneFull, rounds: 1, run: mounted("rclone-full", func(t *testing.T) string { d, _ := mountRclone(t, srv, bucket, "full"); return d })},
	}
	all := make([][]smallRates, len(clients))
	for round := 0; round < benchRuns; round++ {
		for i, c := range clients {
			if c.rounds > 0 && round >= c.rounds {
				continue
			}
			t.Run(fmt.Sprintf("%s/round-%d", c.name, round), func(t *testing.T) {
				all[i] = append(all[i], c.run(t, round))
			})
		}
	}
	pick := func(rs []smallRates, f func(smallRates) float64) float64 {
		if len(rs) == 0 {
			return 0 // every round failed
		}
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	fmt.Printf("\nsmall files and listings: %d creates and %d reads of %d-byte files, a directory of %d objects; median of %d rounds\n",
		smallCreates, smallReads, smallSize, listEntries, benchRuns)
	fmt.Printf("%-24s %12s %12s %14s %16s\n", "client", "creates/s", "reads/s", "list entries/s", "ls -l entries/s")
	var s3fs smallRates
	rows := make([]smallRates, len(clients))
	for i, c := range clients {
		rows[i] = smallRates{
			create: pick(all[i], func(r smallRates) float64 { return r.create }), read: pick(all[i], func(r smallRates) float64 { return r.read }),
			list: pick(all[i], func(r smallRates) float64 { return r.list }), listStat: pick(all[i], func(r smallRates) float64 { return r.listStat }),
		}
		if strings.HasPrefix(c.name, "s3fs") {
			s3fs = rows[i]
		}
	}
	for i, c := range clients {
		r := rows[i]
		fmt.Printf("%-24s %6.0f %5s %6.0f %5s %8.0f %5s %10.0f %5s\n", c.name,
			r.create, ratio(r.create, s3fs.create), r.read, ratio(r.read, s3fs.read),
			r.list, ratio(r.list, s3fs.list), r.listStat, ratio(r.listStat, s3fs.listStat))
	}
	fmt.Println("(ratios are to s3fs)")
	fmt.Println()
}

// smallThroughMount runs the workloads through a FUSE client; every workload gets a fresh mount, so no
// kernel or client cache from an earlier one serves it. Creates are timed until every file is in the bucket.
func smallThroughMount(t *testing.T, mount func(t *testing.T) string, client *s3.Client, bucket string, payload []byte, newDir string) (r smallRates) {
	dir := filepath.Join(mount(t), newDir)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	settle()
	start := time.Now()
	for i := 0; i < smallCreates; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("c-%04d", i)), payload, 0o644); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	waitListed(t, client, bucket, newDir+"/c-", smallCreates)
	r.create = smallCreates / time.Since(start).Seconds()

	dir = mount(t)
	buf := make([]byte, 2*smallSize)
	start = time.Now()
	for i := 0; i < smallReads; i++ {
		f, err := os.Open(filepath.Join(dir, "small", fmt.Sprintf("r-%04d", i)))
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.ReadFull(f, buf)
		_ = f.Close()
		if n != smallSize || err != io.ErrUnexpectedEOF {
			t.Fatalf("read %d: %d bytes, %v", i, n, err)
		}
	}
	r.read = smallReads / time.Since(start).Seconds()

	dir = mount(t)
	start = time.Now()
	ents, err := os.ReadDir(filepath.Join(dir, "many"))
	if err != nil || len(ents) != listEntries {
		t.Fatalf("list: %d entries, %v", len(ents), err)
	}
	r.list = listEntries / time.Since(start).Seconds()

	dir = mount(t)
	start = time.Now()
	ents, err = os.ReadDir(filepath.Join(dir, "many"))
	if err != nil || len(ents) != listEntries {
		t.Fatalf("list: %d entries, %v", len(ents), err)
	}
	for _, e := range ents {
		if _, err := e.Info(); err != nil {
			t.Fatalf("stat %s: %v", e.Name(), err)
		}
	}
	r.listStat = listEntries / time.Since(start).Seconds()
	return r
}

// smallThroughSDK is the limit: one request per file, and ListObjectsV2 pages (names and sizes at once,
// so both listing figures are the same).
func smallThroughSDK(t *testing.T, ctx context.Context, c *s3.Client, bucket string, payload []byte, round int) (r smallRates) {
	settle()
	start := time.Now()
	for i := 0; i < smallCreates; i++ {
		key := fmt.Sprintf("sdk-%d/c-%04d", round, i)
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	r.create = smallCreates / time.Since(start).Seconds()
	start = time.Now()
	for i := 0; i < smallReads; i++ {
		key := fmt.Sprintf("small/r-%04d", i)
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, out.Body)
		_ = out.Body.Close()
		if n != smallSize {
			t.Fatalf("GET %s: %d bytes", key, n)
		}
	}
	r.read = smallReads / time.Since(start).Seconds()
	start = time.Now()
	seen := 0
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String("many/"), Delimiter: aws.String("/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen += len(page.Contents)
	}
	if seen != listEntries {
		t.Fatalf("listed %d objects, want %d", seen, listEntries)
	}
	r.list = listEntries / time.Since(start).Seconds()
	r.listStat = r.list
	return r
}
