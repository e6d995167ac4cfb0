//go:build bench

package netmodel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// object is what the test server serves at every path: GET honours a Range header, PUT answers with
// the SHA-256 of the body it received and echoes the Host header it saw.
type objectServer struct {
	data []byte
	// arrived, if set, receives each request's method as the server sees it.
	arrived chan string
}

func (o *objectServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o.arrived != nil {
		o.arrived <- r.Method
	}
	w.Header().Set("X-Host", r.Host)
	switch r.Method {
	case http.MethodPut:
		h := sha256.New()
		if _, err := io.Copy(h, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%x", h.Sum(nil))
	default:
		http.ServeContent(w, r, "object", time.Time{}, bytes.NewReader(o.data))
	}
}

func startProxy(t *testing.T, target string, cfg Config) *Proxy {
	t.Helper()
	p, err := Start(target, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

func randomBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// client has its own transport, closed at cleanup, so goleak sees no idle connection left behind.
func client(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func TestProxyPassesBytesUnchangedOverConcurrentConnections(t *testing.T) {
	data := randomBytes(8<<20, 1)
	srv := httptest.NewServer(&objectServer{data: data})
	t.Cleanup(srv.Close)
	// A real clock and a cap well above what the test moves: shaping is on, nothing waits long.
	p := startProxy(t, srv.URL, Config{Latency: time.Millisecond, Bandwidth: 4 << 30})
	c := client(t)

	const workers = 16
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	for i := 0; i < workers; i++ {
		wg.Add(2)
		// Ranged GETs of 1 MiB at different offsets, and uploads of different bodies, all at once.
		go func(i int) {
			defer wg.Done()
			off := i * ((len(data) - 1<<20) / workers)
			req, _ := http.NewRequest(http.MethodGet, p.URL+"/bucket/key", nil)
			req.Header.Set("Range", "bytes="+strconv.Itoa(off)+"-"+strconv.Itoa(off+1<<20-1))
			resp, err := c.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusPartialContent || !bytes.Equal(got, data[off:off+1<<20]) {
				errs <- fmt.Errorf("GET at %d: status %d, %d bytes, equal %v, err %v", off, resp.StatusCode, len(got), bytes.Equal(got, data[off:off+1<<20]), err)
			}
		}(i)
		go func(i int) {
			defer wg.Done()
			body := randomBytes(1<<20+i, int64(i))
			req, _ := http.NewRequest(http.MethodPut, p.URL+"/bucket/up", bytes.NewReader(body))
			resp, err := c.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if want := fmt.Sprintf("%x", sha256.Sum256(body)); string(got) != want {
				errs <- fmt.Errorf("PUT %d: server hashed %s, want %s", i, got, want)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestProxyKeepsTheClientsHostHeader(t *testing.T) {
	srv := httptest.NewServer(&objectServer{data: []byte("x")})
	t.Cleanup(srv.Close)
	p := startProxy(t, srv.URL, Config{})
	resp, err := client(t).Get(p.URL + "/b/k")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	// SigV4 signs the Host header: the server must see the address the client signed for.
	if want := p.URL[len("http://"):]; resp.Header.Get("X-Host") != want {
		t.Errorf("server saw Host %q, want %q", resp.Header.Get("X-Host"), want)
	}
}

func TestProxyDelaysEachResponseByTheLatency(t *testing.T) {
	arrived := make(chan string, 1)
	srv := httptest.NewServer(&objectServer{data: []byte("hello"), arrived: arrived})
	t.Cleanup(srv.Close)
	c := clocktesting.NewFakeClock(time.Unix(0, 0))
	p := startProxy(t, srv.URL, Config{Latency: 20 * time.Millisecond, Clock: c})
	hc := client(t)
	for i := 0; i < 2; i++ { // the second request reuses the connection: every request is delayed
		got := make(chan string, 1)
		go func() {
			resp, err := hc.Get(p.URL + "/b/k")
			if err != nil {
				got <- err.Error()
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			got <- string(b)
		}()
		<-arrived // the server has answered; the proxy holds the answer on the clock
		waitForTimer(t, c)
		c.Step(19 * time.Millisecond)
		if !c.HasWaiters() {
			t.Fatal("the response was released before the latency had passed")
		}
		c.Step(time.Millisecond)
		if s := <-got; s != "hello" {
			t.Fatalf("request %d: %q", i, s)
		}
	}
}

func TestProxyPacesBodiesAtTheBandwidth(t *testing.T) {
	const size, rate, burst = 4 << 20, 8 << 20, 1 << 20
	data := randomBytes(size, 2)
	srv := httptest.NewServer(&objectServer{data: data})
	t.Cleanup(srv.Close)
	c := clocktesting.NewFakeClock(time.Unix(0, 0))
	p := startProxy(t, srv.URL, Config{Bandwidth: rate, Burst: burst, Clock: c})
	got := make(chan []byte, 1)
	go func() {
		resp, err := client(t).Get(p.URL + "/b/k")
		if err != nil {
			got <- nil
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- b
	}()
	// Step the clock whenever the proxy waits on it, until the body is through: the fake time that
	// took is what the bucket charged.
	const step = 25 * time.Millisecond
	start := c.Now()
	var body []byte
	for body == nil {
		rig.Eventually(t, context.Background(), 10*time.Second, "the proxy to wait or the body to end", func(context.Context) (bool, error) {
			select {
			case body = <-got:
				return true, nil
			default:
				return c.HasWaiters(), nil
			}
		})
		if body == nil {
			c.Step(step)
		}
	}
	if !bytes.Equal(body, data) {
		t.Fatalf("body of %d bytes differs from the object", len(body))
	}
	// Past the burst, every byte costs 1/rate seconds of fake time, and no step is wasted.
	want := time.Duration(float64(size-burst) / rate * float64(time.Second))
	if took := c.Since(start); took < want || took > want+step {
		t.Errorf("the body took %v of fake time, want %v to %v", took, want, want+step)
	}
}
