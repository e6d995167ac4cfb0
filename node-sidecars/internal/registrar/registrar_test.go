package registrar

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"k8s.io/klog/v2/ktesting"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/stowage-csi/stowage/node-sidecars/internal/flagtest"
	"github.com/stowage-csi/stowage/shared/testutil"
)

const (
	testDriver  = "fake.csi.test"
	hostSocket  = "/var/lib/kubelet/plugins/fake.csi.test/csi.sock"
	testTimeout = 30 * time.Second
)

// running is a registrar serving in the background.
type running struct {
	r      *Registrar
	cancel context.CancelFunc
	done   chan error
}

// startRegistrar runs New and Serve against a fake driver named testDriver, with the registration directory
// regDir, and stops it when the test ends.
func startRegistrar(t *testing.T, regDir string) *running {
	t.Helper()
	driver := testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{Name: testDriver})
	cfg := testConfig(driver.Address, regDir)
	_, ctx := ktesting.NewTestContext(t)
	r, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	run := &running{r: r, cancel: cancel, done: make(chan error, 1)}
	go func() { run.done <- r.Serve(ctx) }()
	t.Cleanup(func() { run.stop(t) })
	return run
}

func testConfig(csiAddress, regDir string) Config {
	return Config{
		CSIAddress:              csiAddress,
		KubeletRegistrationPath: hostSocket,
		PluginRegistrationPath:  regDir,
		HTTPEndpoint:            "127.0.0.1:0",
		Mode:                    ModeRegistration,
		Timeout:                 5 * time.Second,
	}
}

// stop cancels the registrar and returns Serve's result; later calls return nil.
func (run *running) stop(t *testing.T) error {
	t.Helper()
	run.cancel()
	select {
	case err, ok := <-run.done:
		if ok {
			close(run.done)
		}
		return err
	case <-time.After(testTimeout):
		t.Fatal("Serve did not return after its context ended")
		return nil
	}
}

// pluginWatcher dials a registration socket as the kubelet's plugin watcher does.
func pluginWatcher(t *testing.T, socket string) registerapi.RegistrationClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return registerapi.NewRegistrationClient(conn)
}

// staleSocket leaves a socket file at path with nobody listening, as a registrar killed with SIGKILL does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = l.Close()
}

func healthz(t *testing.T, r *Registrar) (int, string) {
	t.Helper()
	rsp, err := http.Get(r.HTTP().URL("/healthz"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rsp.Body.Close() }()
	body, _ := io.ReadAll(rsp.Body)
	return rsp.StatusCode, string(body)
}

func TestRegistrationSocketAnswersThePluginWatcher(t *testing.T) {
	tests := []struct {
		name string
		// before prepares the registration directory.
		before func(t *testing.T, dir string)
	}{
		{name: "empty directory", before: func(*testing.T, string) {}},
		{name: "stale socket replaced", before: func(t *testing.T, dir string) {
			staleSocket(t, filepath.Join(dir, testDriver+"-reg.sock"))
		}},
		{name: "other drivers' sockets left alone", before: func(t *testing.T, dir string) {
			staleSocket(t, filepath.Join(dir, "other.csi.test-reg.sock"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.before(t, dir)
			run := startRegistrar(t, dir)
			if want := filepath.Join(dir, testDriver+"-reg.sock"); run.r.SocketPath() != want {
				t.Fatalf("socket %s, want %s", run.r.SocketPath(), want)
			}
			fi, err := os.Lstat(run.r.SocketPath())
			if err != nil {
				t.Fatal(err)
			}
			if perm := fi.Mode().Perm(); perm&0o077 != 0 {
				t.Errorf("registration socket mode %v, want no access for group and others", perm)
			}

			client := pluginWatcher(t, run.r.SocketPath())
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			info, err := client.GetInfo(ctx, &registerapi.InfoRequest{})
			if err != nil {
				t.Fatalf("GetInfo: %v", err)
			}
			want := &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: testDriver, Endpoint: hostSocket, SupportedVersions: []string{"1.0.0"}}
			if !proto.Equal(info, want) {
				t.Errorf("GetInfo = %v, want %v", info, want)
			}
			if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
				t.Fatalf("NotifyRegistrationStatus: %v", err)
			}
			if registered, failure := run.r.service.status(); !registered || failure != nil {
				t.Errorf("status after a successful registration = %t, %v", registered, failure)
			}
			if code, body := healthz(t, run.r); code != http.StatusOK {
				t.Errorf("/healthz = %d %q, want 200", code, body)
			}
			if other := filepath.Join(dir, "other.csi.test-reg.sock"); tt.name == "other drivers' sockets left alone" {
				if _, err := os.Lstat(other); err != nil {
					t.Errorf("another driver's socket was touched: %v", err)
				}
			}

			if err := run.stop(t); err != nil {
				t.Errorf("Serve after SIGTERM = %v, want nil", err)
			}
			if _, err := os.Lstat(run.r.SocketPath()); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("registration socket after a graceful stop: %v, want it removed", err)
			}
		})
	}
}

func TestNewRefusesWhatItCannotServe(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string) (csiAddress string)
		wantErr string
	}{
		{
			name: "a file that is not a socket at the registration path",
			setup: func(t *testing.T, dir string) string {
				if err := os.WriteFile(filepath.Join(dir, testDriver+"-reg.sock"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
				return testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{Name: testDriver}).Address
			},
			wantErr: "is not a socket",
		},
		{
			name: "a driver without a name",
			setup: func(t *testing.T, dir string) string {
				return testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{}).Address
			},
			wantErr: "empty name",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			addr := tt.setup(t, dir)
			_, ctx := ktesting.NewTestContext(t)
			r, err := New(ctx, testConfig(addr, dir))
			if err == nil {
				r.Close(ctx)
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestFailedRegistrationEndsServe(t *testing.T) {
	run := startRegistrar(t, t.TempDir())
	client := pluginWatcher(t, run.r.SocketPath())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{
		PluginRegistered: false, Error: "plugin validation failed: boom"}); err != nil {
		t.Fatalf("NotifyRegistrationStatus: %v", err)
	}
	select {
	case err := <-run.done:
		close(run.done)
		if err == nil || !strings.Contains(err.Error(), "boom") {
			t.Errorf("Serve = %v, want the kubelet's error", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Serve did not return after a failed registration")
	}
	if code, body := run.r.check(ctx); code != http.StatusInternalServerError || !strings.Contains(body.Error(), "boom") {
		t.Errorf("health check after a failed registration = %d %v, want 500 naming the failure", code, body)
	}
}

func TestHealthz(t *testing.T) {
	tests := []struct {
		name     string
		change   func(t *testing.T, r *Registrar)
		wantCode int
		wantBody string
	}{
		{name: "serving", change: func(*testing.T, *Registrar) {}, wantCode: http.StatusOK, wantBody: "ok"},
		{
			name: "socket removed",
			change: func(t *testing.T, r *Registrar) {
				if err := os.Remove(r.SocketPath()); err != nil {
					t.Fatal(err)
				}
			},
			wantCode: http.StatusNotFound, wantBody: "does not exist",
		},
		{
			name: "socket replaced by a dead one",
			change: func(t *testing.T, r *Registrar) {
				if err := os.Remove(r.SocketPath()); err != nil {
					t.Fatal(err)
				}
				staleSocket(t, r.SocketPath())
			},
			wantCode: http.StatusInternalServerError, wantBody: "GetInfo",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := startRegistrar(t, t.TempDir())
			tt.change(t, run.r)
			code, body := healthz(t, run.r)
			if code != tt.wantCode || !strings.Contains(body, tt.wantBody) {
				t.Errorf("/healthz = %d %q, want %d containing %q", code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
}

func TestKubeletRegistrationProbe(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares the registration directory and returns the probe's --kubelet-registration-path.
		setup   func(t *testing.T, dir string) string
		wantErr string
	}{
		{
			name:  "registrar serving",
			setup: func(t *testing.T, dir string) string { startRegistrar(t, dir); return hostSocket },
		},
		{
			name:    "no socket",
			setup:   func(t *testing.T, dir string) string { return hostSocket },
			wantErr: "no registration socket",
		},
		{
			name: "stale socket only",
			setup: func(t *testing.T, dir string) string {
				staleSocket(t, filepath.Join(dir, testDriver+"-reg.sock"))
				return hostSocket
			},
			wantErr: "no registration socket",
		},
		{
			name: "another driver's registrar",
			setup: func(t *testing.T, dir string) string {
				startRegistrar(t, dir)
				return "/var/lib/kubelet/plugins/other.csi.test/csi.sock"
			},
			wantErr: "fake.csi.test at " + hostSocket,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := tt.setup(t, dir)
			_, ctx := ktesting.NewTestContext(t)
			// Through Run, as the exec probe starts the binary: no --csi-address needed.
			err := Run(ctx, Config{Mode: ModeKubeletRegistrationProbe, KubeletRegistrationPath: path,
				PluginRegistrationPath: dir, Timeout: 5 * time.Second})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("probe: %v, want success", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("probe: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    Config
		wantErr string
	}{
		{
			// deploy/helm/stowage-ebs and deploy/kustomize/ebs, after the kubelet expands $(ADDRESS) and
			// $(DRIVER_REG_SOCK_PATH).
			name: "EBS node DaemonSet",
			args: []string{"--csi-address=/csi/csi.sock", "--kubelet-registration-path=/var/lib/kubelet/plugins/ebs.csi.aws.com/csi.sock", "--http-endpoint=0.0.0.0:9809", "--v=2"},
			want: Config{CSIAddress: "/csi/csi.sock", KubeletRegistrationPath: "/var/lib/kubelet/plugins/ebs.csi.aws.com/csi.sock",
				PluginRegistrationPath: "/registration", HTTPEndpoint: "0.0.0.0:9809", Mode: ModeRegistration, Timeout: time.Second},
		},
		{
			name: "S3 node DaemonSet's exec probe",
			args: []string{"--kubelet-registration-path=/var/lib/kubelet/plugins/s3.csi.aws.com/csi.sock", "--mode=kubelet-registration-probe"},
			want: Config{CSIAddress: DefaultCSIAddress, KubeletRegistrationPath: "/var/lib/kubelet/plugins/s3.csi.aws.com/csi.sock",
				PluginRegistrationPath: "/registration", Mode: ModeKubeletRegistrationProbe, Timeout: time.Second},
		},
		{
			name: "deprecated flags",
			args: []string{"--kubelet-registration-path=/k/csi.sock", "--health-port=9809", "--connection-timeout=15s", "--enable-pprof", "--timeout=3s", "--plugin-registration-path=/reg"},
			want: Config{CSIAddress: DefaultCSIAddress, KubeletRegistrationPath: "/k/csi.sock", PluginRegistrationPath: "/reg",
				HealthPort: 9809, Mode: ModeRegistration, Timeout: 3 * time.Second, ConnectionTimeout: 15 * time.Second, EnablePprof: true},
		},
		{name: "no registration path", args: []string{"--csi-address=/csi/csi.sock"}, wantErr: "--kubelet-registration-path is a required parameter"},
		{
			name:    "health port and endpoint",
			args:    []string{"--kubelet-registration-path=/k/csi.sock", "--health-port=9809", "--http-endpoint=:9809"},
			wantErr: "only one of --health-port and --http-endpoint",
		},
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
		})
	}
}

func TestEndpoint(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{}, ""},
		{Config{HealthPort: 9809}, ":9809"},
		{Config{HealthPort: 0, HTTPEndpoint: "0.0.0.0:9809"}, "0.0.0.0:9809"},
		{Config{HealthPort: -1, HTTPEndpoint: "0.0.0.0:9809"}, "0.0.0.0:9809"},
	}
	for _, tt := range tests {
		if got := tt.cfg.Endpoint(); got != tt.want {
			t.Errorf("%+v.Endpoint() = %q, want %q", tt.cfg, got, tt.want)
		}
	}
}
