package metricsparity

import (
	"context"
	"net/http"
	"testing"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// Scrape fetches url (a process's /metrics) and parses it; it fails t when either fails.
func Scrape(t testing.TB, ctx context.Context, url string) Shape {
	t.Helper()
	code, body := rig.Get(t, ctx, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d: %s", url, code, body)
	}
	s, err := Parse(body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return s
}

// Check fails t with every difference Compare finds between got (Stowage's) and want (upstream's).
func Check(t testing.TB, got, want Shape, o Options) {
	t.Helper()
	for _, d := range Compare(got, want, o) {
		t.Error(d)
	}
}
