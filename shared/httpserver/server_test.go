package httpserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	csimetrics "github.com/kubernetes-csi/csi-lib-utils/metrics"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/shared/metrics"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	// A transport per request, closed after it: no idle keep-alive connection outlives the test for goleak
	// to report.
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	resp, err := (&http.Client{Transport: transport}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

func startServer(t *testing.T) *Server {
	t.Helper()
	s, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

func TestScrapeServesAllMetricFamilies(t *testing.T) {
	reg := metrics.NewRegistry()
	wqMetrics, err := workqueue.NewMetrics(reg.Registerer())
	if err != nil {
		t.Fatal(err)
	}
	q, err := workqueue.New[string](wqMetrics, workqueue.Config{Name: "csi-attacher-va", RetryIntervalStart: time.Second, RetryIntervalMax: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer q.ShutDown()
	q.Add("va-1")
	q.AddRateLimited("va-2")

	csi := csimetrics.NewCSIMetricsManagerWithOptions("hostpath.csi.k8s.io",
		csimetrics.WithCustomRegistry(reg.Kube()), csimetrics.WithProcessStartTime(false))
	csi.RecordMetrics("/csi.v1.Controller/ControllerPublishVolume", status.Error(codes.NotFound, "gone"), 300*time.Millisecond)

	s := startServer(t)
	s.Handle("/metrics", reg.Handler())
	code, body := get(t, s.URL("/metrics"))
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d", code)
	}
	for _, want := range []string{
		`workqueue_depth{name="csi-attacher-va"}`,
		`workqueue_adds_total{name="csi-attacher-va"}`,
		`workqueue_queue_duration_seconds_bucket{name="csi-attacher-va"`,
		`workqueue_work_duration_seconds_bucket{name="csi-attacher-va"`,
		`workqueue_unfinished_work_seconds{name="csi-attacher-va"}`,
		`workqueue_longest_running_processor_seconds{name="csi-attacher-va"}`,
		`workqueue_retries_total{name="csi-attacher-va"} 1`,
		`csi_sidecar_operations_seconds_bucket{driver_name="hostpath.csi.k8s.io",grpc_status_code="NotFound",method_name="/csi.v1.Controller/ControllerPublishVolume"`,
		"go_goroutines",
		"process_start_time_seconds",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if n := strings.Count(body, "# TYPE process_start_time_seconds "); n != 1 {
		t.Errorf("process_start_time_seconds declared %d times, want 1", n)
	}
}

func TestHealthCheck(t *testing.T) {
	tests := []struct {
		name     string
		check    func(*http.Request) error
		wantCode int
		wantBody string
	}{
		{"healthy", func(*http.Request) error { return nil }, http.StatusOK, "ok"},
		{"unhealthy", func(*http.Request) error { return errors.New("lease not renewed") }, http.StatusInternalServerError, "lease not renewed"},
	}
	s := startServer(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "/healthz/" + tt.name
			s.HandleCheck(path, tt.check)
			code, body := get(t, s.URL(path))
			if code != tt.wantCode || !strings.Contains(body, tt.wantBody) {
				t.Errorf("GET %s = %d %q, want %d containing %q", path, code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
}

func TestListenFailsOnBusyPort(t *testing.T) {
	s := startServer(t)
	if _, err := Listen(s.Addr().String()); err == nil {
		t.Fatal("second Listen on a busy port succeeded")
	}
}

func TestServeStopsOnCancel(t *testing.T) {
	s, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	if _, err := http.Get(s.URL("/metrics")); err == nil {
		t.Error("server still answers after shutdown")
	}
}
