package liveness

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2/ktesting"

	"github.com/stowage-csi/stowage/node-sidecars/internal/flagtest"
	"github.com/stowage-csi/stowage/shared/testutil"
)

const (
	testDriver  = "fake.csi.test"
	testTimeout = 30 * time.Second
)

// startProber serves a Prober for the driver socket address on a free port, and stops it when the test ends.
func startProber(t *testing.T, address string, probeTimeout time.Duration) *Prober {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	p, err := New(ctx, Config{CSIAddress: address, ProbeTimeout: probeTimeout, HealthPort: DefaultHealthPort,
		HTTPEndpoint: "127.0.0.1:0", MetricsPath: DefaultMetricsPath})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(testTimeout):
			t.Error("Serve did not return after its context ended")
		}
	})
	return p
}

func get(t *testing.T, p *Prober, path string) (int, string) {
	t.Helper()
	rsp, err := http.Get(p.HealthServer().URL(path))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rsp.Body.Close() }()
	body, _ := io.ReadAll(rsp.Body)
	return rsp.StatusCode, string(body)
}

// waitForHealthz waits until /healthz answers code with a body containing want.
func waitForHealthz(t *testing.T, p *Prober, code int, want string) {
	t.Helper()
	var gotCode int
	var gotBody string
	testutil.Eventually(t, testTimeout, "/healthz to answer "+http.StatusText(code), func() (bool, error) {
		gotCode, gotBody = get(t, p, "/healthz")
		return gotCode == code && strings.Contains(gotBody, want), nil
	})
}

func TestHealthzAnswersWithTheDriversProbe(t *testing.T) {
	tests := []struct {
		name     string
		driver   *testutil.FakeCSIDriver
		wantCode int
		wantBody string
	}{
		{name: "ready", driver: &testutil.FakeCSIDriver{Name: testDriver}, wantCode: http.StatusOK, wantBody: "ok"},
		{
			name:     "not ready",
			driver:   &testutil.FakeCSIDriver{Name: testDriver, NotReadyProbes: 1 << 30},
			wantCode: http.StatusInternalServerError, wantBody: "responded but is not ready",
		},
		{
			name:     "probe fails",
			driver:   &testutil.FakeCSIDriver{Name: testDriver, ProbeErr: status.Error(codes.FailedPrecondition, "disk cache broken")},
			wantCode: http.StatusInternalServerError, wantBody: "disk cache broken",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := testutil.StartFakeCSIDriver(t, tt.driver)
			p := startProber(t, d.Address, 5*time.Second)
			// The first answers may come before the connection: wait for the driver's own answer.
			waitForHealthz(t, p, tt.wantCode, tt.wantBody)
			if probes := d.ProbeCount(); probes == 0 {
				t.Error("the driver was never probed")
			}
		})
	}
}

func TestHealthzFollowsTheDriverAcrossRestarts(t *testing.T) {
	d := testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{Name: testDriver})
	address := d.Address
	// A short probe timeout: while the driver is gone each probe waits that long for it.
	p := startProber(t, address, 500*time.Millisecond)
	steps := []struct {
		name     string
		do       func(t *testing.T)
		wantCode int
		wantBody string
	}{
		{name: "driver up", do: func(*testing.T) {}, wantCode: http.StatusOK, wantBody: "ok"},
		{name: "driver gone", do: func(*testing.T) { d.Stop() }, wantCode: http.StatusInternalServerError, wantBody: "Probe failed"},
		{
			name: "driver back on a new socket, not ready yet",
			do: func(t *testing.T) {
				d = testutil.StartFakeCSIDriverAt(t, &testutil.FakeCSIDriver{Name: testDriver, NotReadyProbes: 1 << 30}, address)
			},
			wantCode: http.StatusInternalServerError, wantBody: "not ready",
		},
		{
			name: "driver restarted ready",
			do: func(t *testing.T) {
				d.Stop()
				d = testutil.StartFakeCSIDriverAt(t, &testutil.FakeCSIDriver{Name: testDriver}, address)
			},
			wantCode: http.StatusOK, wantBody: "ok",
		},
	}
	// Steps in order, each building on the last: a table of one driver's life.
	for _, s := range steps {
		s.do(t)
		t.Logf("step %q", s.name)
		waitForHealthz(t, p, s.wantCode, s.wantBody)
	}
}

func TestHealthzBeforeTheDriverIsUp(t *testing.T) {
	address := t.TempDir() + "/csi.sock"
	p := startProber(t, address, 500*time.Millisecond)
	if code, body := get(t, p, "/healthz"); code != http.StatusInternalServerError || !strings.Contains(body, "not connected") {
		t.Errorf("/healthz without a driver = %d %q, want 500 not connected", code, body)
	}
	d := testutil.StartFakeCSIDriverAt(t, &testutil.FakeCSIDriver{Name: testDriver}, address)
	waitForHealthz(t, p, http.StatusOK, "ok")
	if d.ProbeCount() == 0 {
		t.Error("the driver was never probed")
	}
}

func TestMetricsRecordProbes(t *testing.T) {
	d := testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{Name: testDriver})
	p := startProber(t, d.Address, 5*time.Second)
	waitForHealthz(t, p, http.StatusOK, "ok")
	code, body := get(t, p, DefaultMetricsPath)
	if code != http.StatusOK {
		t.Fatalf("%s = %d", DefaultMetricsPath, code)
	}
	want := `csi_sidecar_operations_seconds_count{driver_name="fake.csi.test",grpc_status_code="OK",method_name="/csi.v1.Identity/Probe"}`
	if !strings.Contains(body, want) {
		t.Errorf("metrics lack %s:\n%s", want, body)
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    Config
		wantErr string
		addr    string
	}{
		{
			name: "EBS controller pod",
			args: []string{"--csi-address=/csi/csi.sock", "--probe-timeout=60s"},
			want: Config{CSIAddress: "/csi/csi.sock", ProbeTimeout: time.Minute, HealthPort: "9808", MetricsPath: "/metrics"},
			addr: "0.0.0.0:9808",
		},
		{
			name: "node pods",
			args: []string{"--csi-address=/csi/csi.sock"},
			want: Config{CSIAddress: "/csi/csi.sock", ProbeTimeout: time.Second, HealthPort: "9808", MetricsPath: "/metrics"},
			addr: "0.0.0.0:9808",
		},
		{
			name: "http endpoint with metrics",
			args: []string{"--http-endpoint=:9810", "--metrics-path=/m"},
			want: Config{CSIAddress: DefaultCSIAddress, ProbeTimeout: time.Second, HealthPort: "9808", HTTPEndpoint: ":9810", MetricsPath: "/m"},
			addr: ":9810",
		},
		{
			name: "deprecated metrics address",
			args: []string{"--health-port=9900", "--metrics-address=:8080"},
			want: Config{CSIAddress: DefaultCSIAddress, ProbeTimeout: time.Second, HealthPort: "9900", MetricsAddress: ":8080", MetricsPath: "/metrics"},
			addr: "0.0.0.0:9900",
		},
		{name: "health port and endpoint", args: []string{"--health-port=9900", "--http-endpoint=:9810"}, wantErr: "only one of --health-port and --http-endpoint"},
		{name: "metrics address and endpoint", args: []string{"--metrics-address=:8080", "--http-endpoint=:9810"}, wantErr: "only one of --metrics-address and --http-endpoint"},
		{name: "zero probe timeout", args: []string{"--probe-timeout=0s"}, wantErr: "--probe-timeout must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := flagtest.Parse(t, Binary, AddFlags, tt.args)
			if flagtest.Refused(t, err, tt.wantErr) {
				return
			}
			if *cfg != tt.want {
				t.Errorf("config = %+v, want %+v", *cfg, tt.want)
			}
			if got := cfg.HealthAddress(); got != tt.addr {
				t.Errorf("HealthAddress() = %q, want %q", got, tt.addr)
			}
		})
	}
}
