package kubeclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// versionServer answers /version, with API Priority and Fairness's headers when apf is set, and counts
// the requests.
func versionServer(t *testing.T, apf bool, status int) (*httptest.Server, *int) {
	t.Helper()
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if apf {
			w.Header().Set("X-Kubernetes-PF-FlowSchema-UID", "fs-uid")
			w.Header().Set("X-Kubernetes-PF-PriorityLevel-UID", "pl-uid")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"major":"1","minor":"36"}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestRateLimitChoice(t *testing.T) {
	tests := []struct {
		name       string
		apf        bool
		status     int
		adaptive   bool
		wantQPS    float32
		wantSource string
		wantCalls  int
	}{
		{"server with APF, flags not given: no client-side limiter", true, 200, true, -1, RateServerFairness, 1},
		{"server without APF: the fixed defaults", false, 200, true, 20, RateFallback, 1},
		{"server answering an error: the fixed defaults", true, 500, true, 20, RateFallback, 1},
		{"flags given: honoured exactly, the server is not asked", true, 200, false, 20, RateFromFlags, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, calls := versionServer(t, tt.apf, tt.status)
			clients, err := New(context.Background(), Options{Kubeconfig: writeKubeconfig(t, srv.URL), QPS: 20, Burst: 100, AdaptiveRate: tt.adaptive})
			if err != nil {
				t.Fatal(err)
			}
			r := clients.RateLimit
			if r.QPS != tt.wantQPS || r.Burst != 100 || r.Source != tt.wantSource || *calls != tt.wantCalls {
				t.Fatalf("rate %+v after %d requests, want QPS %v from %s after %d", r, *calls, tt.wantQPS, tt.wantSource, tt.wantCalls)
			}
			if clients.Config.QPS != tt.wantQPS {
				t.Fatalf("the clients' configuration has QPS %v, want %v", clients.Config.QPS, tt.wantQPS)
			}
		})
	}
}

func TestRateLimitMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := RegisterRateLimit(reg, RateLimit{QPS: -1, Burst: 100, Source: RateServerFairness}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP stowage_kube_client_rate_limit_qps Client-side QPS limit towards the Kubernetes API server chosen at start-up; -1 means none (the server's API Priority and Fairness paces the process).
# TYPE stowage_kube_client_rate_limit_qps gauge
stowage_kube_client_rate_limit_qps{burst="100",source="apf"} -1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
