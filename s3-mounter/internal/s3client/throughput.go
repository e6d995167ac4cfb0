package s3client

import (
	"context"
	"io"
	"time"

	"golang.org/x/time/rate"
)

// throughputBurst is the most one request may move before the limiter is asked again: small enough
// that a capped mount sends evenly, large enough that a read of a part costs few waits.
const throughputBurst = 1 << 20

// GbpsToBytes converts --maximum-throughput-gbps (decimal gigabits per second) to bytes per second.
func GbpsToBytes(gbps float64) float64 { return gbps * 1e9 / 8 }

// Throughput caps the bytes per second this process moves to and from S3, object data both ways.
// Mountpoint only uses --maximum-throughput-gbps to size its connection pool, so a lower value does not
// keep it below the figure (awslabs/mountpoint-s3#961); s3-fuse honours the number as a cap. A nil
// *Throughput does not limit.
type Throughput struct {
	lim *rate.Limiter
	// now and sleep are the clock; tests replace them.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// NewThroughput returns a cap of bytesPerSecond, or nil (no cap) when it is not positive.
func NewThroughput(bytesPerSecond float64) *Throughput {
	if bytesPerSecond <= 0 {
		return nil
	}
	burst := int(min(bytesPerSecond, throughputBurst))
	return &Throughput{lim: rate.NewLimiter(rate.Limit(bytesPerSecond), max(burst, 1)), now: time.Now, sleep: sleepCtx}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// chunk is the largest amount one wait may cover.
func (t *Throughput) chunk() int { return t.lim.Burst() }

// wait blocks until n bytes (at most chunk()) may move.
func (t *Throughput) wait(ctx context.Context, n int) error {
	now := t.now()
	r := t.lim.ReserveN(now, n)
	if d := r.DelayFrom(now); d > 0 {
		if err := t.sleep(ctx, d); err != nil {
			r.CancelAt(t.now())
			return err
		}
	}
	return nil
}

// Wait blocks until n bytes may move, in chunks; it returns early only when ctx ends.
func (t *Throughput) Wait(ctx context.Context, n int) error {
	if t == nil {
		return nil
	}
	for n > 0 {
		c := min(n, t.chunk())
		if err := t.wait(ctx, c); err != nil {
			return err
		}
		n -= c
	}
	return nil
}

// Body returns rc with every read paced by the cap: a response body is then received no faster than
// allowed (TCP flow control holds the rest back at the server).
func (t *Throughput) Body(ctx context.Context, rc io.ReadCloser) io.ReadCloser {
	if t == nil {
		return rc
	}
	return &pacedBody{ReadCloser: rc, t: t, ctx: ctx}
}

type pacedBody struct {
	io.ReadCloser
	t   *Throughput
	ctx context.Context
}

func (b *pacedBody) Read(p []byte) (int, error) {
	if len(p) > b.t.chunk() {
		p = p[:b.t.chunk()]
	}
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		if werr := b.t.wait(b.ctx, n); werr != nil && err == nil {
			err = werr
		}
	}
	return n, err
}
