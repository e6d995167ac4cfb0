//go:build bench

// Package netmodel is a network between S3 clients and a local S3 server: an HTTP proxy on loopback that
// adds a first-byte latency to every response and caps the bandwidth of all connections together with a
// token bucket per direction, so benchmarks on one machine see what a node sees of S3 (the network and
// S3's latency as the limit) instead of loopback's near-free bytes. It serves benchmarks only, so it builds
// (and its tests run) under the bench tag alone: `make bench`, never `make test`.
package netmodel

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Defaults model a node's path to S3: tens of ms to the first byte, and a few Gbit/s.
const (
	DefaultLatency   = 20 * time.Millisecond
	DefaultBandwidth = 400 << 20 // bytes per second, each direction
)

// chunk is the most one body read moves before it waits on the bucket: small against the burst, so
// concurrent connections interleave finely, and large enough to keep the proxy's syscalls few.
const chunk = 256 << 10

// Config shapes the proxy's traffic. Zero Latency adds none; zero Bandwidth is no cap.
type Config struct {
	// Latency delays the start of each response (its status line and headers) after the server's
	// answer arrives.
	Latency time.Duration
	// Bandwidth caps response bodies of all connections together, and separately request bodies, in
	// bytes per second (a full-duplex link).
	Bandwidth int64
	// Burst is the bucket's depth in bytes (default 1 MiB).
	Burst int64
	// Clock defaults to the real one; tests pass a fake.
	Clock clock.Clock
	// Listen is the proxy's address (default 127.0.0.1:0, a free loopback port).
	Listen string
}

// Default is the model the benchmarks use.
func Default() Config { return Config{Latency: DefaultLatency, Bandwidth: DefaultBandwidth} }

// Proxy is a running network model in front of one server.
type Proxy struct {
	// URL is the proxy's endpoint (http://127.0.0.1:port): clients use it in place of the server's.
	URL string

	srv       *http.Server
	transport *http.Transport
	served    chan struct{}
}

// Start serves a proxy to target (http://host:port) on cfg.Listen.
func Start(target string, cfg Config) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 1 << 20
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConnsPerHost: 256,
		ReadBufferSize:      chunk,
		WriteBufferSize:     chunk,
		DisableCompression:  true,
	}
	sh := &shaper{next: tr, clock: cfg.Clock, latency: cfg.Latency}
	if cfg.Bandwidth > 0 {
		sh.up = NewBucket(cfg.Clock, cfg.Bandwidth, cfg.Burst)
		sh.down = NewBucket(cfg.Clock, cfg.Bandwidth, cfg.Burst)
	}
	rp := &httputil.ReverseProxy{
		// Keep the client's Host header: SigV4 signatures made for the proxy's address still verify.
		Rewrite:    func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host },
		Transport:  sh,
		BufferPool: bufferPool{},
		// Bodies go to the client as the bucket lets them through, not when a buffer fills.
		FlushInterval: -1,
		// A client that closes a connection mid-body (a reader that stops early) is not news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), transport: tr, served: make(chan struct{}),
		srv: &http.Server{Handler: rp, ReadHeaderTimeout: time.Minute}}
	go func() {
		defer close(p.served)
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// Close stops the proxy and closes its connections, in flight or idle.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	<-p.served
	p.transport.CloseIdleConnections()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// shaper is the proxy's transport: it delays each response and paces bodies through the buckets.
type shaper struct {
	next     http.RoundTripper
	clock    clock.Clock
	latency  time.Duration
	up, down *Bucket // nil: no cap
}

func (s *shaper) RoundTrip(req *http.Request) (*http.Response, error) {
	if s.up != nil && req.Body != nil && req.Body != http.NoBody {
		req.Body = &paced{ReadCloser: req.Body, ctx: req.Context(), bucket: s.up}
	}
	resp, err := s.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if s.latency > 0 {
		t := s.clock.NewTimer(s.latency)
		select {
		case <-t.C():
		case <-req.Context().Done():
			t.Stop()
			_ = resp.Body.Close()
			return nil, req.Context().Err()
		}
	}
	if s.down != nil {
		resp.Body = &paced{ReadCloser: resp.Body, ctx: req.Context(), bucket: s.down}
	}
	return resp, nil
}

// paced is a body whose bytes pass only as fast as its bucket allows.
type paced struct {
	io.ReadCloser
	ctx    context.Context
	bucket *Bucket
}

func (p *paced) Read(b []byte) (int, error) {
	if len(b) > chunk {
		b = b[:chunk]
	}
	n, err := p.ReadCloser.Read(b)
	if n > 0 {
		if werr := p.bucket.Wait(p.ctx, n); werr != nil {
			return n, werr
		}
	}
	return n, err
}

// bufferPool gives the reverse proxy chunk-sized copy buffers (its default is 32 KiB).
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, chunk); return &b }}

func (bufferPool) Get() []byte  { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }
