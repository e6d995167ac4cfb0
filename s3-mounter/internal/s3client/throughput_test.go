package s3client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

// fakeClock advances only when the throughput cap sleeps, so the slept total is exact.
type fakeClock struct {
	t     time.Time
	slept time.Duration
	// failAfter makes sleeps fail once this much has been slept (a cancelled context).
	failAfter time.Duration
}

func (c *fakeClock) install(t *Throughput) {
	t.now = func() time.Time { return c.t }
	t.sleep = func(_ context.Context, d time.Duration) error {
		if c.failAfter > 0 && c.slept+d > c.failAfter {
			return context.Canceled
		}
		c.slept += d
		c.t = c.t.Add(d)
		return nil
	}
}

func near(got, want time.Duration) bool {
	diff := got - want
	return diff > -time.Millisecond && diff < time.Millisecond
}

func TestThroughputWaitPacesAfterTheBurst(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name      string
		rate      float64
		moves     []int
		wantSleep time.Duration
	}{
		// The first MiB is the burst; the other 9 take 9/4 s.
		{"one large upload", 4 * mib, []int{10 * mib}, 2250 * time.Millisecond},
		{"parts add up", 4 * mib, []int{2 * mib, 3 * mib, 5 * mib}, 2250 * time.Millisecond},
		{"within the burst", 4 * mib, []int{mib}, 0},
		// Below 1 MiB/s the burst is one second's worth.
		{"slow cap", 100_000, []int{300_000}, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := NewThroughput(tc.rate)
			clk := &fakeClock{t: time.Unix(1000, 0)}
			clk.install(th)
			for _, n := range tc.moves {
				if err := th.Wait(context.Background(), n); err != nil {
					t.Fatal(err)
				}
			}
			if !near(clk.slept, tc.wantSleep) {
				t.Errorf("slept %v, want %v", clk.slept, tc.wantSleep)
			}
		})
	}
}

func TestThroughputBodyPacesReads(t *testing.T) {
	const mib = 1 << 20
	th := NewThroughput(2 * mib)
	clk := &fakeClock{t: time.Unix(1000, 0)}
	clk.install(th)
	src := bytes.Repeat([]byte("s3"), 5*mib/2)
	body := th.Body(context.Background(), io.NopCloser(bytes.NewReader(src)))
	got, err := io.ReadAll(io.LimitReader(body, int64(len(src))))
	if err != nil || !bytes.Equal(got, src) {
		t.Fatalf("read %d bytes, err %v; want the 5 MiB unchanged", len(got), err)
	}
	// 5 MiB at 2 MiB/s after a 1 MiB burst.
	if !near(clk.slept, 2*time.Second) {
		t.Errorf("slept %v, want 2s", clk.slept)
	}
	// One read never takes more than the burst, so a huge buffer cannot skip the pacing.
	big := make([]byte, 8*mib)
	body = th.Body(context.Background(), io.NopCloser(bytes.NewReader(src)))
	if n, _ := body.Read(big); n != mib {
		t.Errorf("one read returned %d bytes, want at most %d", n, mib)
	}
}

func TestThroughputStopsWithTheContext(t *testing.T) {
	th := NewThroughput(1 << 20)
	clk := &fakeClock{t: time.Unix(1000, 0), failAfter: time.Second}
	clk.install(th)
	err := th.Wait(context.Background(), 10<<20)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want the context's error", err)
	}
	body := th.Body(context.Background(), io.NopCloser(bytes.NewReader(make([]byte, 4<<20))))
	if _, err := io.ReadAll(body); !errors.Is(err, context.Canceled) {
		t.Fatalf("paced read = %v, want the context's error", err)
	}
}

func TestNoThroughputCap(t *testing.T) {
	th := NewThroughput(0)
	if th != nil {
		t.Fatalf("NewThroughput(0) = %+v, want nil (no cap)", th)
	}
	rc := io.NopCloser(bytes.NewReader(nil))
	if th.Body(context.Background(), rc) != rc {
		t.Error("without a cap the body must be returned as is")
	}
	if err := th.Wait(context.Background(), 1<<30); err != nil {
		t.Error(err)
	}
	if got := GbpsToBytes(1); got != 125e6 {
		t.Errorf("1 Gbps = %v bytes/s, want 125e6", got)
	}
}
