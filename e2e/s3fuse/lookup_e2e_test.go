//go:build e2e

package s3fuse

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/s3server"
)

// requestCounter is a reverse proxy in front of the S3 server that counts requests by kind. It keeps the
// client's Host header, so SigV4 signatures made for the proxy's address still verify.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *requestCounter) kind(r *http.Request) string {
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodGet && q.Get("list-type") == "2":
		return "LIST " + q.Get("prefix")
	case r.Method == http.MethodHead:
		return "HEAD"
	default:
		return r.Method
	}
}

// get returns the count of one kind ("HEAD", "GET", or "LIST <prefix>").
func (c *requestCounter) get(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[kind]
}

// listsUnder counts LISTs whose prefix starts with p.
func (c *requestCounter) listsUnder(p string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.counts {
		if strings.HasPrefix(k, "LIST "+p) {
			n += v
		}
	}
	return n
}

func (c *requestCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = map[string]int{}
}

// countingProxy returns a copy of srv whose endpoint is a counting proxy to it.
func countingProxy(t *testing.T, srv *s3server.Server) (*s3server.Server, *requestCounter) {
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c := &requestCounter{counts: map[string]int{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := c.kind(r)
		c.mu.Lock()
		c.counts[k]++
		c.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	proxied := *srv
	proxied.Endpoint = ts.URL
	return &proxied, c
}

// TestE2ELookupsShareADirectoryListing reads every file of a directory by path, as a program that knows
// the names does: the first lookup lists the directory (one page), and the lookups after it are answered
// from that listing for the metadata TTL, so each file costs one GET and no HEAD. A directory larger than
// one page is not listed for lookups: its files are looked up one by one (HEAD and LIST).
func TestE2ELookupsShareADirectoryListing(t *testing.T) {
	srv := s3server.Start(t)
	bucket := newBucket(t, srv)
	const small, big = 100, 1001
	for i := 0; i < small; i++ {
		if err := srv.WriteFixture(bucket, fmt.Sprintf("few/f-%03d", i), []byte(fmt.Sprintf("file %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < big; i++ {
		if err := srv.WriteFixture(bucket, fmt.Sprintf("many/f-%04d", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// Subdirectories are found through the same listing (versitygw's posix backend cannot hold an object
	// and a directory of one name, so shadowing is not exercised here).
	for _, k := range []string{"few/sub/inner", "many/sub/inner"} {
		if err := srv.WriteFixture(bucket, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	proxied, counter := countingProxy(t, srv)
	m := mountBucket(t, proxied, bucket)

	counter.reset()
	start := time.Now()
	for i := 0; i < small; i++ {
		got, err := os.ReadFile(filepath.Join(m.Dir, "few", fmt.Sprintf("f-%03d", i)))
		if err != nil || string(got) != fmt.Sprintf("file %d", i) {
			t.Fatalf("read few/f-%03d: %q, %v", i, got, err)
		}
	}
	took := time.Since(start)
	heads, gets, lists := counter.get("HEAD"), counter.get("GET"), counter.listsUnder("few/")
	t.Logf("%d files of few/ read in %v: %d HEAD, %d GET, %d LIST", small, took, heads, gets, lists)
	if heads != 0 || gets != small {
		t.Errorf("reading %d files of a listed directory sent %d HEADs and %d GETs, want 0 and %d", small, heads, gets, small)
	}
	// One listing per metadata TTL (1 s) at most, however slow the machine.
	if limit := int(took/time.Second) + 2; lists > limit {
		t.Errorf("%d LISTs of few/ in %v, want at most %d", lists, took, limit)
	}

	counter.reset()
	for i := 0; i < 3; i++ {
		if _, err := os.ReadFile(filepath.Join(m.Dir, "many", fmt.Sprintf("f-%04d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if heads := counter.get("HEAD"); heads != 3 {
		t.Errorf("looking up 3 files of a directory larger than a page sent %d HEADs, want one each", heads)
	}
	if pages := counter.get("LIST many/"); pages > 1 {
		t.Errorf("a directory larger than a page was listed %d times for lookups, want at most once", pages)
	}

	for _, dir := range []string{"few", "many"} {
		st, err := os.Stat(filepath.Join(m.Dir, dir, "sub"))
		if err != nil || !st.IsDir() {
			t.Errorf("%s/sub is not a directory: %v, %v", dir, st, err)
		}
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "few", "nosuch")); !os.IsNotExist(err) {
		t.Errorf("stat of a missing name = %v, want ENOENT", err)
	}
}
