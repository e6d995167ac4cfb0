package prefetch_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stowage-csi/stowage/s3-mounter/internal/bufpool"
	"github.com/stowage-csi/stowage/s3-mounter/internal/prefetch"
	"github.com/stowage-csi/stowage/s3-mounter/internal/testutil"
)

const part = 64 << 10

func setup(t *testing.T, size int) (*testutil.FakeS3, []byte, prefetch.Object) {
	t.Helper()
	f := testutil.NewFakeS3()
	data := make([]byte, size)
	rand.New(rand.NewSource(1)).Read(data)
	etag, err := f.Store("k", data)
	if err != nil {
		t.Fatal(err)
	}
	f.Puts = 0
	return f, data, prefetch.Object{Key: "k", ETag: etag, Size: int64(size)}
}

func read(t *testing.T, r *prefetch.Reader, off int64, n int) []byte {
	t.Helper()
	d, err := r.ReadAt(context.Background(), off, n)
	if err != nil {
		t.Fatalf("ReadAt(%d, %d): %v", off, n, err)
	}
	defer d.Release()
	return bytes.Join(d.Chunks, nil)
}

func TestSequentialReadsGrowTheWindowUpToTheMaximum(t *testing.T) {
	f, data, obj := setup(t, 40*part)
	cfg := prefetch.Config{PartSize: part, InitialWindow: part, MaxWindow: 8 * part}
	r := prefetch.NewReader(context.Background(), f, obj, cfg)
	defer r.Close()
	var windows []int64
	var got []byte
	for off := int64(0); off < obj.Size; off += part / 2 {
		got = append(got, read(t, r, off, part/2)...)
		windows = append(windows, r.Window())
	}
	if !bytes.Equal(got, data) {
		t.Fatal("sequential read returned wrong bytes")
	}
	if windows[0] > 2*part {
		t.Errorf("first window %d, want at most 2 parts", windows[0])
	}
	for i := 1; i < len(windows); i++ {
		if windows[i] < windows[i-1] {
			t.Fatalf("window shrank during sequential reads: %v", windows)
		}
	}
	if last := windows[len(windows)-1]; last != cfg.MaxWindow {
		t.Errorf("window after a long sequential read = %d, want the maximum %d", last, cfg.MaxWindow)
	}
	for _, g := range f.Gets() {
		if g.Len > part {
			t.Errorf("GET of %d bytes exceeds the part size", g.Len)
		}
	}
	if len(f.Gets()) != 40 {
		t.Errorf("%d GETs for 40 parts, want each part fetched once", len(f.Gets()))
	}
	if st := r.Stats(); st.Direct != 0 || st.Parts != 40 || st.Streamed != 80 {
		t.Errorf("stats %+v, want 80 streamed reads from 40 parts", st)
	}
}

func TestSequentialReadRequestsAheadInParallel(t *testing.T) {
	f, _, obj := setup(t, 40*part)
	r := prefetch.NewReader(context.Background(), f, obj, prefetch.Config{PartSize: part, InitialWindow: part, MaxWindow: 4 * part})
	defer r.Close()
	for off := int64(0); off < 4*part; off += part {
		read(t, r, off, part)
	}
	start, end := r.InFlight()
	if end-start < 4*part {
		t.Errorf("requested ahead [%d,%d), want at least 4 parts past the reader", start, end)
	}
}

func TestRandomReadsFetchOnlyWhatIsAsked(t *testing.T) {
	f, data, obj := setup(t, 100*part)
	r := prefetch.NewReader(context.Background(), f, obj, prefetch.DefaultConfig(part, 8))
	defer r.Close()
	rng := rand.New(rand.NewSource(2))
	// A first read away from 0 is random.
	for i := 0; i < 50; i++ {
		off := int64(rng.Intn(int(obj.Size)-4096-1)) + 1
		if got := read(t, r, off, 4096); !bytes.Equal(got, data[off:off+4096]) {
			t.Fatalf("random read at %d returned wrong bytes", off)
		}
	}
	var total int64
	for _, g := range f.Gets() {
		total += g.Len
	}
	if total > 50*4096*2 {
		t.Errorf("50 random 4 KiB reads fetched %d bytes; random reads must not prefetch", total)
	}
	if st := r.Stats(); st.Direct != 50 || st.Parts != 0 {
		t.Errorf("stats %+v, want 50 direct reads and no part GETs", st)
	}
}

func TestSeekResetsTheWindowAndSequentialReadsResume(t *testing.T) {
	f, data, obj := setup(t, 64*part)
	cfg := prefetch.Config{PartSize: part, InitialWindow: part, MaxWindow: 8 * part}
	r := prefetch.NewReader(context.Background(), f, obj, cfg)
	defer r.Close()
	for off := int64(0); off < 8*part; off += part {
		read(t, r, off, part)
	}
	if r.Window() != cfg.MaxWindow {
		t.Fatalf("window %d before the seek, want %d", r.Window(), cfg.MaxWindow)
	}
	jump := int64(40 * part)
	if got := read(t, r, jump, 100); !bytes.Equal(got, data[jump:jump+100]) {
		t.Fatal("read after seek returned wrong bytes")
	}
	if r.Window() != cfg.InitialWindow {
		t.Errorf("window after a seek = %d, want the initial %d", r.Window(), cfg.InitialWindow)
	}
	// Continuing from the seek target streams again.
	got := read(t, r, jump+100, 3*part)
	if !bytes.Equal(got, data[jump+100:jump+100+3*part]) {
		t.Fatal("sequential read after seek returned wrong bytes")
	}
	if _, end := r.InFlight(); end <= jump+100+3*part {
		t.Errorf("no prefetch after reads resumed sequentially (requested up to %d)", end)
	}
}

func TestConcurrentReadersOfOneHandleGetTheRightBytes(t *testing.T) {
	f, data, obj := setup(t, 32*part+123)
	r := prefetch.NewReader(context.Background(), f, obj, prefetch.DefaultConfig(part, 4))
	defer r.Close()
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	// Reads arrive in pairs out of order, as the kernel's async readahead sends them.
	for off := int64(0); off < obj.Size; off += 2 * 16384 {
		for _, o := range []int64{off + 16384, off} {
			wg.Add(1)
			go func(o int64) {
				defer wg.Done()
				d, err := r.ReadAt(context.Background(), o, 16384)
				if err != nil {
					errs <- err.Error()
					return
				}
				defer d.Release()
				end := min(o+16384, obj.Size)
				if o < obj.Size && !bytes.Equal(bytes.Join(d.Chunks, nil), data[o:end]) {
					errs <- "wrong bytes"
				}
			}(o)
		}
		wg.Wait()
	}
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

func TestReadPastEndAndShortTail(t *testing.T) {
	f, data, obj := setup(t, part+10)
	r := prefetch.NewReader(context.Background(), f, obj, prefetch.DefaultConfig(part, 2))
	defer r.Close()
	if got := read(t, r, 0, 2*part); !bytes.Equal(got, data) {
		t.Errorf("read of the whole object returned %d bytes, want %d", len(got), len(data))
	}
	if got := read(t, r, obj.Size, 10); len(got) != 0 {
		t.Errorf("read at EOF returned %d bytes", len(got))
	}
}

func TestChangedObjectFailsTheRead(t *testing.T) {
	f, _, obj := setup(t, 2*part)
	if _, err := f.Store("k", []byte("replaced")); err != nil {
		t.Fatal(err)
	}
	r := prefetch.NewReader(context.Background(), f, obj, prefetch.DefaultConfig(part, 2))
	defer r.Close()
	if d, err := r.ReadAt(context.Background(), 0, 100); err == nil {
		d.Release()
		t.Fatal("read of an overwritten object version succeeded")
	}
}

func TestReorderedReadaheadStillStreams(t *testing.T) {
	f, data, obj := setup(t, 64*part)
	cfg := prefetch.Config{PartSize: 4 * part, InitialWindow: 4 * part, MaxWindow: 16 * part}
	r := prefetch.NewReader(context.Background(), f, obj, cfg)
	defer r.Close()
	// The kernel's readahead requests overtake the first read, and later ones arrive out of order.
	order := []int64{2, 0, 1, 4, 3, 5, 7, 6}
	for _, i := range order {
		off := i * part
		if got := read(t, r, off, part); !bytes.Equal(got, data[off:off+part]) {
			t.Fatalf("read %d returned wrong bytes", i)
		}
	}
	var direct int
	for _, g := range f.Gets() {
		if g.Len < cfg.PartSize && g.Off+g.Len != obj.Size {
			direct++
		}
	}
	if direct > 1 {
		t.Errorf("%d small direct GETs for reordered sequential reads (gets %v), want at most 1", direct, f.Gets())
	}
	if r.Window() <= cfg.InitialWindow {
		t.Errorf("window %d did not grow for reordered sequential reads", r.Window())
	}
}

func TestPooledBuffersAreNotReusedWhileAReadHoldsThem(t *testing.T) {
	f, data, obj := setup(t, 64*part)
	pool := bufpool.New(part, 8)
	cfg := prefetch.Config{PartSize: part, InitialWindow: part, MaxWindow: 4 * part, Pool: pool}
	// Two readers share the pool, so buffers one of them recycles are handed to the other.
	holder := prefetch.NewReader(context.Background(), f, obj, cfg)
	churn := prefetch.NewReader(context.Background(), f, obj, cfg)
	type held struct {
		d   *prefetch.Data
		off int64
	}
	check := func(h held) {
		t.Helper()
		if got := bytes.Join(h.d.Chunks, nil); !bytes.Equal(got, data[h.off:h.off+int64(len(got))]) || len(got) == 0 {
			t.Fatalf("held read at %d changed after its part left the window", h.off)
		}
	}
	var queue []held
	for off := int64(0); off < obj.Size; off += part / 2 {
		d, err := holder.ReadAt(context.Background(), off, part/2)
		if err != nil {
			t.Fatal(err)
		}
		queue = append(queue, held{d, off})
		if got := read(t, churn, off, part/2); !bytes.Equal(got, data[off:off+part/2]) {
			t.Fatalf("churn read at %d wrong", off)
		}
		// Keep six reads (three parts) unreleased while the window moves on.
		if len(queue) > 6 {
			check(queue[0])
			queue[0].d.Release()
			queue = queue[1:]
		}
		if off == 32*part {
			// A seek and a close drop whole windows while reads still hold their parts.
			read(t, churn, 3, 10)
			churn.Close()
			churn = prefetch.NewReader(context.Background(), f, obj, cfg)
			read(t, churn, 0, part/2)
		}
	}
	for _, h := range queue {
		check(h)
		h.d.Release()
	}
	holder.Close()
	churn.Close()
}

func TestStreamingReaderFillsSeveralPartsPerGET(t *testing.T) {
	f, data, obj := setup(t, 40*part)
	cfg := prefetch.Config{PartSize: part, InitialWindow: part, MaxWindow: 4 * part, Stream: f, BatchParts: 2}
	r := prefetch.NewReader(context.Background(), f, obj, cfg)
	defer r.Close()
	var got []byte
	for off := int64(0); off < obj.Size; off += part / 2 {
		got = append(got, read(t, r, off, part/2)...)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("sequential read through streamed GETs returned wrong bytes")
	}
	st := r.Stats()
	if st.Parts != 40 || st.GETs >= st.Parts || f.Streams == 0 {
		t.Errorf("stats %+v with %d streamed GETs, want 40 parts from fewer GETs", st, f.Streams)
	}
	if gets := f.Gets(); len(gets) != st.GETs {
		t.Errorf("server saw %d GETs, reader counted %d", len(gets), st.GETs)
	}
	for _, g := range f.Gets() {
		if g.Len > 2*part {
			t.Errorf("GET of %d bytes exceeds two parts", g.Len)
		}
	}
}

func TestBrokenStreamFailsTheReadAndARetryRefetches(t *testing.T) {
	f, data, obj := setup(t, 40*part)
	cfg := prefetch.Config{PartSize: part, InitialWindow: part, MaxWindow: 4 * part, Stream: f, BatchParts: 2}
	r := prefetch.NewReader(context.Background(), f, obj, cfg)
	defer r.Close()
	// The first streamed GET breaks halfway through its second part.
	f.StreamFailAfter = part + part/2
	var got []byte
	failures := 0
	for off := int64(0); off < obj.Size; {
		d, err := r.ReadAt(context.Background(), off, part/2)
		if err != nil {
			if failures++; failures > 1 {
				t.Fatalf("read at %d failed again after a retry: %v", off, err)
			}
			continue
		}
		b := bytes.Join(d.Chunks, nil)
		d.Release()
		got = append(got, b...)
		off += int64(len(b))
	}
	if failures != 1 {
		t.Errorf("%d failed reads, want exactly the one that hit the broken stream", failures)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("reads after a broken stream returned wrong bytes")
	}
}

// hangingGetter answers no GET until the GET's context ends, and counts the GETs still running.
type hangingGetter struct {
	started chan struct{}
	running atomic.Int32
}

func (g *hangingGetter) GetRange(ctx context.Context, _ prefetch.Object, _ int64, _ []byte) error {
	g.running.Add(1)
	defer g.running.Add(-1)
	select {
	case g.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestCloseWaitsForTheGETsInFlight: once Close returns no prefetch GET is running, so none uses the
// connection or a part buffer after the file was released.
func TestCloseWaitsForTheGETsInFlight(t *testing.T) {
	g := &hangingGetter{started: make(chan struct{}, 1)}
	obj := prefetch.Object{Key: "k", Size: 8 * part}
	r := prefetch.NewReader(context.Background(), g, obj, prefetch.DefaultConfig(part, 4))
	ctx, cancel := context.WithCancel(context.Background())
	readErr := make(chan error, 1)
	go func() {
		_, err := r.ReadAt(ctx, 0, part)
		readErr <- err
	}()
	<-g.started
	cancel()
	if err := <-readErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("read cancelled while its GET hangs: %v, want context.Canceled", err)
	}
	r.Close()
	if n := g.running.Load(); n != 0 {
		t.Errorf("%d GETs still running after Close returned", n)
	}
	// A read after Close starts no prefetch that Close would not have waited for.
	if _, err := r.ReadAt(ctx, 0, 10); err == nil {
		t.Error("read after Close with a cancelled context succeeded")
	}
	if n := g.running.Load(); n != 0 {
		t.Errorf("%d GETs running after a read on a closed reader returned", n)
	}
}
