//go:build bench

package s3fuse

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stowage-csi/stowage/e2e/netmodel"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3server"
)

const (
	modelSize        = 1 << 30
	modelRandomReads = 100
	modelRandomSize  = 1 << 20
	modelSmallFiles  = 200
	modelSmallSize   = 4096
	modelListEntries = 2000
	modelWriteSize   = 256 << 20
	// The SDK downloads with s3-fuse's default read part size and --max-threads.
	modelPartSize    = 8 << 20
	modelConcurrency = 16
)

// netClient is a row of the network model's tables: an SDK client (concurrency > 0: the download
// manager's) or a FUSE client (mount returns its mount directory and the pid of its FUSE server).
type netClient struct {
	name        string
	concurrency int
	// seqOnly rows read sequentially only (a second SDK configuration, whose other figures are the first's).
	seqOnly bool
	mount   func(t *testing.T, srv *s3server.Server) (string, int)
}

// netSample is one round of one client on one network.
type netSample struct {
	seq float64 // MiB/s
	// cpuAll is the CPU of this process (the reader), the FUSE server and versitygw per MiB read
	// sequentially; cpuFS the FUSE server's alone; cpuNet the network model's, not in cpuAll (ms/MiB).
	cpuAll, cpuFS, cpuNet float64
	random, small         float64 // reads/s
	list                  float64 // entries/s, each with its size (ls -l)
	write                 float64 // MiB/s until the object is in the bucket
}

// netInput is what every client reads.
type netInput struct {
	bucket  string
	data    []byte
	offsets []int64
}

// TestBenchS3FuseNetModel reads through a network model (e2e/netmodel: a first-byte latency added to
// every response, a bandwidth cap shared by all connections) and, for comparison, straight from
// versitygw on loopback: a 1 GiB object sequentially, random 1 MiB reads and 4 KiB files by name, for
// the SDK (the download manager at s3-fuse's part size and --max-threads), s3-fuse and s3fs, all
// through the same proxy in the same run. It prints tables and the targets with pass or miss;
// nothing is asserted about timing. S3FUSE_NET_LATENCY (a duration) and S3FUSE_NET_MIBS (MiB/s)
// change the model, S3FUSE_NET_ROUNDS the rounds, S3FUSE_BASELINE another s3-fuse build to compare
// (with S3FUSE_BASELINE_ARGS: the current build with other options).
func TestBenchS3FuseNetModel(t *testing.T) {
	cfg := netmodel.Default()
	if v := os.Getenv("S3FUSE_NET_LATENCY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("S3FUSE_NET_LATENCY: %v", err)
		}
		cfg.Latency = d
	}
	if v := os.Getenv("S3FUSE_NET_MIBS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("S3FUSE_NET_MIBS: %v", err)
		}
		cfg.Bandwidth = n << 20
	}
	rounds := rig.EnvCount(t, "S3FUSE_NET_ROUNDS", benchRuns)

	srv := s3server.Start(t)
	in := newNetInput(t, srv)
	proxy := startNetModel(t, srv.Endpoint, cfg)
	// The same server behind the proxy: clients sign for the proxy's address, which it passes on.
	shaped := *srv
	shaped.Endpoint = proxy.url
	shaped.Client = shaped.NewClient()
	ensurePeers(t)

	clients := []netClient{
		{name: fmt.Sprintf("aws-sdk-go-v2 manager %d x %d MiB", modelConcurrency, modelPartSize>>20), concurrency: modelConcurrency},
		// s3-fuse's window on this machine: min(--max-threads, max(4, 2 x CPUs)) parts.
		{name: fmt.Sprintf("aws-sdk-go-v2 manager %d x %d MiB", 4, modelPartSize>>20), concurrency: 4, seqOnly: true},
	}
	if base := os.Getenv("S3FUSE_BASELINE"); base != "" {
		clients = append(clients, netClient{name: "s3-fuse baseline", mount: func(t *testing.T, srv *s3server.Server) (string, int) {
			m := mountBinary(t, base, srv, in.bucket, strings.Fields(os.Getenv("S3FUSE_BASELINE_ARGS"))...)
			return m.Dir, m.cmd.Process.Pid
		}})
	}
	clients = append(clients,
		netClient{name: "s3-fuse", mount: func(t *testing.T, srv *s3server.Server) (string, int) {
			m := mountBucket(t, srv, in.bucket)
			return m.Dir, m.cmd.Process.Pid
		}},
		netClient{name: "s3fs 1.90", mount: func(t *testing.T, srv *s3server.Server) (string, int) { return mountS3fs(t, srv, in.bucket) }},
		netClient{name: rcloneOff, mount: func(t *testing.T, srv *s3server.Server) (string, int) { return mountRclone(t, srv, in.bucket, "off") }},
		netClient{name: rcloneFull, mount: func(t *testing.T, srv *s3server.Server) (string, int) { return mountRclone(t, srv, in.bucket, "full") }},
	)
	srvPid := serverPid(t, srv)
	networks := []struct {
		name string
		srv  *s3server.Server
		pids pidsOf
	}{
		{fmt.Sprintf("network model: %v before each response, %d MiB/s each direction", cfg.Latency, cfg.Bandwidth>>20), &shaped,
			pidsOf{server: srvPid, proxy: proxy.proc.Pid()}},
		{"loopback, unshaped: versitygw directly", srv, pidsOf{server: srvPid}},
	}

	dst := make([]byte, modelSize)
	samples := make([][][]netSample, len(networks))
	for n := range networks {
		samples[n] = make([][]netSample, len(clients))
	}
	for round := 0; round < rounds; round++ {
		for n, nw := range networks {
			for i, c := range clients {
				t.Run(fmt.Sprintf("%s/%s/round-%d", map[int]string{0: "model", 1: "loopback"}[n], c.name, round), func(t *testing.T) {
					var s netSample
					// Every write stores a key of its own: overwriting costs the server more.
					key := fmt.Sprintf("written/%d-%d-%d", n, i, round)
					if c.mount == nil {
						s = netSDK(t, nw.srv.Client, c, nw.pids, in, dst, key)
					} else {
						s = netMount(t, c, nw.srv, nw.pids, in, key)
					}
					samples[n][i] = append(samples[n][i], s)
				})
			}
		}
	}
	fmt.Printf("\ns3-fuse on a network model: a %d MiB object read sequentially, %d random %d MiB reads, %d files of %d KiB read by name,\n",
		modelSize>>20, modelRandomReads, modelRandomSize>>20, modelSmallFiles, modelSmallSize>>10)
	fmt.Printf("a directory of %d objects listed with sizes (ls -l), a %d MiB file written sequentially (timed until it is in the bucket);\n",
		modelListEntries, modelWriteSize>>20)
	fmt.Printf("every client through the same proxy (e2e/netmodel), versitygw on 127.0.0.1, %d cores, median of %d rounds\n", runtimeCPUs(), rounds)
	for n, nw := range networks {
		rows := printNetTable(nw.name, clients, samples[n])
		printNetTargets(clients, rows, n == 0)
	}
}

// newNetInput stores the 1 GiB object, the small files and the directory to list.
func newNetInput(t *testing.T, srv *s3server.Server) netInput {
	in := netInput{bucket: newBucket(t, srv), data: make([]byte, modelSize)}
	rand.New(rand.NewSource(1024)).Read(in.data)
	if err := sdkUpload(context.Background(), srv.Client, in.bucket, "big.bin", in.data, 16<<20); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < modelSmallFiles; i++ {
		if err := srv.WriteFixture(in.bucket, fmt.Sprintf("small/f-%04d", i), in.data[i*modelSmallSize:(i+1)*modelSmallSize]); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < modelListEntries; i++ {
		if err := srv.WriteFixture(in.bucket, fmt.Sprintf("list/e-%05d", i), in.data[:16]); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewSource(5))
	in.offsets = make([]int64, modelRandomReads)
	for i := range in.offsets {
		in.offsets[i] = rng.Int63n(modelSize/modelRandomSize) * modelRandomSize
	}
	return in
}

// netSDK runs the workloads with the SDK: the download manager into a resident buffer, one ranged GET per
// random read, one GET per file, ListObjectsV2 pages (names and sizes at once), and the upload manager (parts
// of modelPartSize, 4 at a time) storing key.
func netSDK(t *testing.T, client *s3.Client, c netClient, pids pidsOf, in netInput, dst []byte, key string) (s netSample) {
	ctx := context.Background()
	for i := 0; i < len(dst); i += 4096 {
		dst[i] = ^in.data[i] // bytes this download did not write cannot pass the check
	}
	settle()
	cpu := pids.start(t, 0)
	start := time.Now()
	n, err := sdkDownload(ctx, client, in.bucket, "big.bin", dst, modelPartSize, c.concurrency)
	el := time.Since(start)
	s.cpuAll, s.cpuFS, s.cpuNet = cpu.perMiB(t, n)
	if err != nil || n != modelSize || !bytes.Equal(dst, in.data) {
		t.Fatalf("download: n=%d err=%v (or wrong bytes)", n, err)
	}
	s.seq = mibps(n, el)
	if c.seqOnly {
		return s
	}

	get := func(key, rng string) []byte {
		in := &s3.GetObjectInput{Bucket: &in.bucket, Key: aws.String(key)}
		if rng != "" {
			in.Range = &rng
		}
		out, err := client.GetObject(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	start = time.Now()
	for _, off := range in.offsets {
		if b := get("big.bin", fmt.Sprintf("bytes=%d-%d", off, off+modelRandomSize-1)); !bytes.Equal(b, in.data[off:off+modelRandomSize]) {
			t.Fatalf("GET at %d: wrong bytes", off)
		}
	}
	s.random = modelRandomReads / time.Since(start).Seconds()
	start = time.Now()
	for i := 0; i < modelSmallFiles; i++ {
		if b := get(fmt.Sprintf("small/f-%04d", i), ""); len(b) != modelSmallSize {
			t.Fatalf("GET small/f-%04d: %d bytes", i, len(b))
		}
	}
	s.small = modelSmallFiles / time.Since(start).Seconds()

	start = time.Now()
	seen := 0
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: &in.bucket, Prefix: aws.String("list/"), Delimiter: aws.String("/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen += len(page.Contents)
	}
	if seen != modelListEntries {
		t.Fatalf("listed %d objects, want %d", seen, modelListEntries)
	}
	s.list = modelListEntries / time.Since(start).Seconds()

	settle()
	start = time.Now()
	if err := sdkUpload(ctx, client, in.bucket, key, in.data[:modelWriteSize], modelPartSize); err != nil {
		t.Fatal(err)
	}
	s.write = mibps(modelWriteSize, time.Since(start))
	return s
}

// netMount runs the workloads through a FUSE client, each on a fresh mount so neither the page
// cache nor the client's cache from an earlier one serves it. Every byte read is compared with the
// object (a memcmp: a few percent of the reader's CPU).
func netMount(t *testing.T, c netClient, srv *s3server.Server, pids pidsOf, in netInput, key string) (s netSample) {
	dir, pid := c.mount(t, srv)
	settle()
	cpu := pids.start(t, pid)
	start := time.Now()
	n, err := readCompare(filepath.Join(dir, "big.bin"), in.data)
	el := time.Since(start)
	s.cpuAll, s.cpuFS, s.cpuNet = cpu.perMiB(t, n)
	if err != nil {
		t.Fatalf("read through %s: %v", c.name, err)
	}
	s.seq = mibps(n, el)

	dir, _ = c.mount(t, srv)
	f, err := os.Open(filepath.Join(dir, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, modelRandomSize)
	start = time.Now()
	for _, off := range in.offsets {
		if _, err := f.ReadAt(buf, off); err != nil || !bytes.Equal(buf, in.data[off:off+modelRandomSize]) {
			t.Fatalf("random read at %d through %s: %v (or wrong bytes)", off, c.name, err)
		}
	}
	s.random = modelRandomReads / time.Since(start).Seconds()

	dir, _ = c.mount(t, srv)
	small := make([]byte, 2*modelSmallSize)
	start = time.Now()
	for i := 0; i < modelSmallFiles; i++ {
		f, err := os.Open(filepath.Join(dir, "small", fmt.Sprintf("f-%04d", i)))
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.ReadFull(f, small)
		_ = f.Close()
		if n != modelSmallSize || err != io.ErrUnexpectedEOF {
			t.Fatalf("read small/f-%04d through %s: %d bytes, %v", i, c.name, n, err)
		}
	}
	s.small = modelSmallFiles / time.Since(start).Seconds()
	s.list = netList(t, c, srv)
	s.write = netWrite(t, c, srv, in, key)
	return s
}

// netList lists the directory of modelListEntries objects through a fresh mount and stats every entry, as
// ls -l does, and returns entries per second.
func netList(t *testing.T, c netClient, srv *s3server.Server) float64 {
	dir, _ := c.mount(t, srv)
	start := time.Now()
	ents, err := os.ReadDir(filepath.Join(dir, "list"))
	if err != nil || len(ents) != modelListEntries {
		t.Fatalf("list through %s: %d entries, %v", c.name, len(ents), err)
	}
	for _, e := range ents {
		if fi, err := e.Info(); err != nil || fi.Size() != 16 {
			t.Fatalf("stat %s through %s: %v (or a wrong size)", e.Name(), c.name, err)
		}
	}
	return modelListEntries / time.Since(start).Seconds()
}

// netWrite writes modelWriteSize bytes as key through a fresh mount in 1 MiB writes and returns MiB/s
// until the object is in the bucket.
func netWrite(t *testing.T, c netClient, srv *s3server.Server, in netInput, key string) float64 {
	dir, _ := c.mount(t, srv)
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(key)), 0o755); err != nil {
		t.Fatal(err)
	}
	settle()
	start := time.Now()
	f, err := os.Create(filepath.Join(dir, key))
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < modelWriteSize; off += benchBufSize {
		if _, err := f.Write(in.data[off : off+benchBufSize]); err != nil {
			t.Fatalf("write through %s at %d: %v", c.name, off, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close through %s: %v", c.name, err)
	}
	waitStored(t, srv.Client, in.bucket, key, modelWriteSize)
	return mibps(modelWriteSize, time.Since(start))
}

// pidsOf names the processes whose CPU a sequential read is charged with besides this one and the FUSE
// server: versitygw, and the network model's proxy (0 on loopback).
type pidsOf struct{ server, proxy int }

// cpuMark is the CPU the processes of one read had used when it started.
type cpuMark struct {
	pids           pidsOf
	fs             int
	all, fsCPU, nm time.Duration
}

func (p pidsOf) start(t *testing.T, fsPid int) cpuMark {
	return cpuMark{pids: p, fs: fsPid, all: cpuOf(t, os.Getpid(), fsPid, p.server), fsCPU: cpuOf(t, fsPid), nm: cpuOf(t, p.proxy)}
}

// perMiB returns the CPU per MiB of n bytes since the mark: all of the client's path, the FUSE server
// alone, and the network model's.
func (m cpuMark) perMiB(t *testing.T, n int64) (all, fs, nm float64) {
	return msPerMiB(cpuOf(t, os.Getpid(), m.fs, m.pids.server)-m.all, n), msPerMiB(cpuOf(t, m.fs)-m.fsCPU, n),
		msPerMiB(cpuOf(t, m.pids.proxy)-m.nm, n)
}

// netModelProc is the network model running as a process of its own (e2e/netmodel/cmd/netmodel), so
// its CPU is not charged to the clients.
type netModelProc struct {
	url  string
	proc *rig.Process
}

// startNetModel builds and starts the network model in front of target; cleanup stops it.
func startNetModel(t *testing.T, target string, cfg netmodel.Config) netModelProc {
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin, err := rig.BuildCommand(context.Background(), root, "e2e/netmodel", "netmodel", dir, "bench")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	p, err := rig.Start(rig.Spec{Name: "netmodel", Path: bin, LogDir: dir, Args: []string{"--target", target, "--listen", addr,
		"--latency", cfg.Latency.String(), "--bandwidth-mib", strconv.FormatInt(cfg.Bandwidth>>20, 10)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	rig.Eventually(t, context.Background(), 30*time.Second, "the network model to listen on "+addr, func(context.Context) (bool, error) {
		select {
		case <-p.Done():
			return false, fmt.Errorf("netmodel exited: %s", p.Tail(20))
		default:
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false, err
		}
		_ = c.Close()
		return true, nil
	})
	return netModelProc{url: "http://" + addr, proc: p}
}

// readCompare reads path sequentially in 1 MiB reads and checks the bytes against want.
func readCompare(path string, want []byte) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, benchBufSize)
	var off int64
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if off+int64(n) > int64(len(want)) || !bytes.Equal(buf[:n], want[off:off+int64(n)]) {
				return off, fmt.Errorf("bytes at %d differ from the object", off)
			}
			off += int64(n)
		}
		if err == io.EOF {
			if off != int64(len(want)) {
				return off, fmt.Errorf("read %d bytes, want %d", off, len(want))
			}
			return off, nil
		}
		if err != nil {
			return off, err
		}
	}
}
