//go:build bench

package s3fuse

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stowage-csi/stowage/e2e/s3server"
)

const (
	benchSize    = 256 << 20
	randomReads  = 2000
	randomSize   = 4096
	benchRuns    = 3
	benchBufSize = 1 << 20
)

// result is one row of the table; zero means not measured.
type result struct {
	name                  string
	readMiBs, writeMiBs   float64
	randomIOPS, randomMiB float64
	// readCPU is the CPU every process involved (client, FUSE server, versitygw) spent per MiB read, in ms.
	readCPU float64
}

// median of the runs, so one disturbed run (other builds share the 2 cores) does not decide.
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func mibps(n int64, d time.Duration) float64 { return float64(n) / (1 << 20) / d.Seconds() }

// benchInput is what every client of TestBenchS3Fuse reads and writes.
type benchInput struct {
	bucket string
	// data is the object seq.bin in the bucket and src, the file the FUSE clients copy in; want is its
	// SHA-256.
	data []byte
	src  string
	want [32]byte
	// offsets are the random 4 KiB reads, the same for every client.
	offsets []int64
}

// TestBenchS3Fuse measures 256 MiB sequential read and write and 4 KiB random reads through s3-fuse,
// against the aws-sdk-go-v2 download/upload manager on the same versitygw (the limit), s3fs and
// rclone mount. It prints a table with ratios; nothing is asserted about timing.
func TestBenchS3Fuse(t *testing.T) {
	srv := s3server.Start(t)
	in := newBenchInput(t, srv)
	ensurePeers(t)
	clients := benchClients(srv, in)
	samples := runBenchRounds(t, srv, in, clients)
	printBenchResults(clients, samples)
}

// newBenchInput stores the benchmark's object in a new bucket and in a local file.
func newBenchInput(t *testing.T, srv *s3server.Server) benchInput {
	in := benchInput{bucket: newBucket(t, srv), src: filepath.Join(t.TempDir(), "src.bin"), data: make([]byte, benchSize)}
	rand.New(rand.NewSource(256)).Read(in.data)
	if err := os.WriteFile(in.src, in.data, 0o644); err != nil {
		t.Fatal(err)
	}
	in.want = sha256.Sum256(in.data)
	if err := sdkUpload(context.Background(), srv.Client, in.bucket, "seq.bin", in.data, 16<<20); err != nil {
		t.Fatal(err)
	}
	in.offsets = make([]int64, randomReads)
	rng := rand.New(rand.NewSource(4))
	for i := range in.offsets {
		in.offsets[i] = rng.Int63n(benchSize/randomSize) * randomSize
	}
	return in
}

// benchClients are the rows of the table: the SDK's limit, then the FUSE clients.
func benchClients(srv *s3server.Server, in benchInput) []benchClient {
	// The limit without checksums (what s3-fuse does), and with the SDK's defaults: CRC32 trailers on
	// uploads. (The SDK does not validate checksums of ranged GETs, so the two read alike.)
	crc := s3.New(srv.Client.Options(), func(o *s3.Options) {
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenSupported
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenSupported
	})
	return []benchClient{
		{name: "aws-sdk-go-v2 manager (limit)", raw: srv.Client},
		// What an application that allocates its destination pays: the page faults of 256 MiB.
		{name: "  same, fresh buffer each", raw: srv.Client, fresh: true},
		{name: "  same, default checksums", raw: crc},
		// FUSE alone: the object served from this process's memory, no S3.
		{name: "FUSE from memory (no S3)", readOnly: true, mount: func(t *testing.T) (string, int) { return mountMemory(t, in.data), 0 }},
		{name: "s3-fuse", mount: func(t *testing.T) (string, int) {
			m := mountBucket(t, srv, in.bucket, "--allow-overwrite")
			return m.Dir, m.cmd.Process.Pid
		}},
		{name: "s3fs 1.90", mount: func(t *testing.T) (string, int) { return mountS3fs(t, srv, in.bucket) }},
		// One round is enough to place each rclone mode beside the others.
		{name: rcloneOff, rounds: 1, mount: func(t *testing.T) (string, int) { return mountRclone(t, srv, in.bucket, "off") }},
		{name: rcloneFull, rounds: 1, mount: func(t *testing.T) (string, int) { return mountRclone(t, srv, in.bucket, "full") }},
	}
}

// runBenchRounds measures every client benchRuns times (or its own rounds) and returns the samples, one
// entry per client. Rounds run every client back to back, so each sees the same machine load (other
// builds share the 2 cores).
func runBenchRounds(t *testing.T, srv *s3server.Server, in benchInput, clients []benchClient) []samples3 {
	srvPid := serverPid(t, srv)
	samples := make([]samples3, len(clients))
	// The limit downloads into one buffer for the whole run: a fresh 256 MiB buffer charges it 65,536
	// page faults, more or fewer depending on what memory the Go heap happens to recycle (the
	// "fresh buffer" row shows that case).
	dst := make([]byte, benchSize)
	for round := 0; round < benchRuns; round++ {
		for i, c := range clients {
			if c.rounds > 0 && round >= c.rounds {
				continue
			}
			t.Run(fmt.Sprintf("%s/round-%d", strings.TrimSpace(c.name), round), func(t *testing.T) {
				var m measured
				if c.raw != nil {
					into := dst
					if c.fresh {
						into = nil
					}
					m = rawSDK(t, c.raw, srvPid, in.bucket, in.data, into, in.offsets)
				} else {
					m = measureMount(t, c, srv, srvPid, in, round)
				}
				samples[i].read = append(samples[i].read, m.read)
				samples[i].write = append(samples[i].write, m.write)
				samples[i].iops = append(samples[i].iops, m.iops)
				samples[i].cpu = append(samples[i].cpu, m.readCPU)
			})
		}
	}
	return samples
}

// printBenchResults prints each client's median over the rounds, then every round.
func printBenchResults(clients []benchClient, samples []samples3) {
	var rows []result
	for i, c := range clients {
		r := result{name: c.name}
		if len(samples[i].read) > 0 {
			r.readMiBs, r.writeMiBs, r.randomIOPS = median(samples[i].read), median(samples[i].write), median(samples[i].iops)
			r.readCPU = median(samples[i].cpu)
			r.randomMiB = r.randomIOPS * randomSize / (1 << 20)
		}
		rows = append(rows, r)
	}
	printTable(rows)
	fmt.Println("per round (MiB/s read, MiB/s write, 4K reads/s):")
	for i, c := range clients {
		fmt.Printf("  %-30s", strings.TrimSpace(c.name))
		for r := range samples[i].read {
			fmt.Printf("  %5.0f %4.0f %5.0f", samples[i].read[r], samples[i].write[r], samples[i].iops[r])
		}
		fmt.Println()
	}
}

// benchClient is a raw SDK client or a FUSE client (mount returns its mount directory and the pid of
// its FUSE server, 0 for one in this process).
type benchClient struct {
	name   string
	raw    *s3.Client
	mount  func(t *testing.T) (string, int)
	rounds int
	// fresh makes a raw client download into a newly allocated buffer each round.
	fresh bool
	// readOnly clients are not written to.
	readOnly bool
}

type samples3 struct{ read, write, iops, cpu []float64 }

// measured is one round of one client.
type measured struct {
	read, write, iops float64
	// readCPU is ms of CPU per MiB of the sequential read, summed over this process (the reader), the
	// FUSE server and versitygw.
	readCPU float64
}

// cpuOf sums the CPU the processes have used so far; a pid of 0 is skipped.
func cpuOf(t *testing.T, pids ...int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		if pid == 0 {
			continue
		}
		cpu, _, err := cpuTime(pid)
		if err != nil {
			t.Fatalf("CPU time of %d: %v", pid, err)
		}
		sum += cpu
	}
	return sum
}

func msPerMiB(d time.Duration, n int64) float64 {
	return float64(d.Microseconds()) / 1000 / (float64(n) / (1 << 20))
}

// rawSDK measures the limit: manager.Download (16 MiB ranges, 4 at a time) into dst (nil: a new
// buffer), manager.Upload (8 MiB parts, 4 at a time), and one ranged GET per random read.
func rawSDK(t *testing.T, client *s3.Client, srvPid int, bucket string, data, dst []byte, offsets []int64) (m measured) {
	ctx := context.Background()
	if dst == nil {
		// Memory fresh from the kernel (the Go heap would hand back the last round's resident buffer):
		// the download takes the page faults; zeros cannot pass for the random object.
		m, err := syscall.Mmap(-1, 0, benchSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = syscall.Munmap(m) }()
		dst = m
	} else {
		// Every page differs from the object before the download (and is resident), so the check
		// after it sees only bytes this download wrote.
		for i := 0; i < len(dst); i += 4096 {
			dst[i] = ^data[i]
		}
	}
	settle()
	cpu0 := cpuOf(t, os.Getpid(), srvPid)
	start := time.Now()
	n, err := sdkDownload(ctx, client, bucket, "seq.bin", dst, 16<<20, 4)
	el := time.Since(start)
	m.readCPU = msPerMiB(cpuOf(t, os.Getpid(), srvPid)-cpu0, n)
	if err != nil || n != benchSize || !bytes.Equal(dst, data) {
		t.Fatalf("download: n=%d err=%v (or wrong bytes)", n, err)
	}
	m.read = mibps(n, el)
	settle()
	start = time.Now()
	if err := sdkUpload(ctx, client, bucket, "raw-write.bin", data, 8<<20); err != nil {
		t.Fatal(err)
	}
	m.write = mibps(benchSize, time.Since(start))
	settle()
	start = time.Now()
	for _, off := range offsets {
		rng := fmt.Sprintf("bytes=%d-%d", off, off+randomSize-1)
		out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("seq.bin"), Range: &rng})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, out.Body)
		_ = out.Body.Close()
	}
	m.iops = float64(len(offsets)) / time.Since(start).Seconds()
	return m
}

// measureMount runs the three workloads once through one FUSE client; a write is timed until the object is
// in the bucket. Each workload uses a fresh mount,
// so the kernel page cache of an earlier one cannot serve it. The first round also verifies the bytes
// read, outside the timed read.
func measureMount(t *testing.T, c benchClient, srv *s3server.Server, srvPid int, in benchInput, round int) (m measured) {
	name, want, offsets := c.name, in.want, in.offsets
	if !c.readOnly {
		dir, _ := c.mount(t)
		settle()
		start := time.Now()
		key := fmt.Sprintf("w-%d.bin", round)
		if err := copyFile(in.src, filepath.Join(dir, key)); err != nil {
			t.Fatalf("write through %s: %v", name, err)
		}
		waitStored(t, srv.Client, in.bucket, key, benchSize)
		m.write = mibps(benchSize, time.Since(start))
	}

	dir, pid := c.mount(t)
	settle()
	cpu0 := cpuOf(t, os.Getpid(), pid, srvPid)
	start := time.Now()
	n, _, err := readFile(filepath.Join(dir, "seq.bin"), false)
	el := time.Since(start)
	m.readCPU = msPerMiB(cpuOf(t, os.Getpid(), pid, srvPid)-cpu0, n)
	if err != nil || n != benchSize {
		t.Fatalf("read through %s: n=%d err=%v", name, n, err)
	}
	m.read = mibps(n, el)
	if round == 0 {
		dir, _ := c.mount(t)
		if _, sum, err := readFile(filepath.Join(dir, "seq.bin"), true); err != nil || sum != want {
			t.Errorf("%s returned different bytes (err %v)", name, err)
		}
	}

	dir, _ = c.mount(t)
	f, err := os.Open(filepath.Join(dir, "seq.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, randomSize)
	settle()
	start = time.Now()
	for _, off := range offsets {
		if _, err := f.ReadAt(buf, off); err != nil {
			t.Fatalf("random read at %d: %v", off, err)
		}
	}
	m.iops = float64(len(offsets)) / time.Since(start).Seconds()
	return m
}

// settle writes back dirty pages (the server's copy of the last object written) before a timed
// workload, so the kernel's writeback does not take CPU from the next client measured.
func settle() { syscall.Sync() }

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.CopyBuffer(out, in, make([]byte, benchBufSize)); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close() // completes the upload
}

func readFile(path string, hash bool) (int64, [32]byte, error) {
	var sum [32]byte
	f, err := os.Open(path)
	if err != nil {
		return 0, sum, err
	}
	defer f.Close()
	var w io.Writer = io.Discard
	h := sha256.New()
	if hash {
		w = h
	}
	n, err := io.CopyBuffer(w, f, make([]byte, benchBufSize))
	copy(sum[:], h.Sum(nil))
	return n, sum, err
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func printTable(rows []result) {
	raw, s3fs, mem, ours := rows[0], result{}, result{}, result{}
	for _, r := range rows {
		switch {
		case strings.HasPrefix(r.name, "s3fs"):
			s3fs = r
		case strings.HasPrefix(r.name, "FUSE from memory"):
			mem = r
		case r.name == "s3-fuse":
			ours = r
		}
	}
	cores := runtimeCPUs()
	fmt.Printf("\ns3-fuse benchmark: 256 MiB object, %d x 4 KiB random reads, versitygw on 127.0.0.1, %d cores, median of %d rounds\n",
		randomReads, cores, benchRuns)
	fmt.Printf("%-30s %12s %9s %9s %11s %13s %9s %9s %12s %9s\n", "client", "seq read", "vs limit", "vs s3fs", "read CPU",
		"seq write", "vs limit", "vs s3fs", "4K rand/s", "vs s3fs")
	for _, r := range rows {
		fmt.Printf("%-30s %12s %9s %9s %11s %13s %9s %9s %12s %9s\n", r.name,
			figure(r.readMiBs, "%.0f MiB/s"), ratio(r.readMiBs, raw.readMiBs), ratio(r.readMiBs, s3fs.readMiBs),
			figure(r.readCPU, "%.2f ms/MiB"),
			figure(r.writeMiBs, "%.0f MiB/s"), ratio(r.writeMiBs, raw.writeMiBs), ratio(r.writeMiBs, s3fs.writeMiBs),
			figure(r.randomIOPS, "%.0f"), ratio(r.randomIOPS, s3fs.randomIOPS))
	}
	fmt.Println("read CPU: CPU time of the reader, the FUSE server and versitygw together, per MiB read sequentially.")
	// Client, FUSE server and versitygw share the cores, so CPU per byte bounds throughput. A FUSE
	// filesystem over S3 does at least the limit's work (the server sends, the client receives each
	// byte) and the memory filesystem's (each byte handed to the kernel, cached, copied to the reader).
	if cpu := raw.readCPU + mem.readCPU; cpu > 0 && cores > 0 {
		bound := float64(cores) * 1000 / cpu
		fmt.Printf("CPU bound of any FUSE filesystem over this server: %.2f ms/MiB (limit) + %.2f ms/MiB (FUSE from memory) = %.2f ms/MiB;\n",
			raw.readCPU, mem.readCPU, cpu)
		fmt.Printf("  on %d cores at most %.0f MiB/s = %s of the limit. s3-fuse reads at %s of this bound.\n",
			cores, bound, ratio(bound, raw.readMiBs), ratio(ours.readMiBs, bound))
	}
	fmt.Println()
}

// figure formats a measured value, or "-" when it was not measured.
func figure(v float64, format string) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func runtimeCPUs() int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "processor\t:")
}
