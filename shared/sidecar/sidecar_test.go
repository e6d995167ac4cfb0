package sidecar

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr/funcr"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/flags"
	"github.com/stowage-csi/stowage/shared/testutil"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

// kubeconfig points at a closed port: Run builds clients but these tests never reach the API server.
func kubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	content := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n" +
		"contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// resetLogging undoes logsapi.ValidateAndApply, which refuses a second configuration in one process, and
// stops the klog flush daemon it starts (a process-wide goroutine in production, a leak in a test).
func resetLogging(t *testing.T) {
	t.Cleanup(func() {
		if err := logsapi.ResetForTest(nil); err != nil {
			t.Errorf("resetting logging: %v", err)
		}
		klog.StopFlushDaemon()
	})
}

func options(args ...string) Options {
	return Options{
		Binary:           "csi-test",
		Defaults:         flags.Defaults{Timeout: 15 * time.Second, WorkerThreads: 10},
		LockPrefix:       "external-test-leader-",
		Args:             args,
		Stdout:           io.Discard,
		OnConnectionLoss: func(context.Context) bool { return false },
		OnLeaseLost:      func() {},
	}
}

// ownFlagOptions are options(args...) for a sidecar with a flag of its own, --sidecar-flag, that its Validate
// wants "good", and a run that must not be reached; stdout collects what Run prints.
func ownFlagOptions(t *testing.T, args ...string) (Options, *bytes.Buffer, func(context.Context, *Env) error) {
	var out bytes.Buffer
	o := options(args...)
	o.Stdout = &out
	var own string
	o.AddFlags = func(fs *flag.FlagSet, _ *flags.Common) { fs.StringVar(&own, "sidecar-flag", "good", "test flag") }
	o.Validate = func() error {
		if own != "good" {
			return errors.New("--sidecar-flag must be good")
		}
		return nil
	}
	return o, &out, func(context.Context, *Env) error {
		t.Error("run was called")
		return nil
	}
}

func TestRunStopsEarly(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantErr    string
		wantStdout string
	}{
		{name: "version", args: []string{"--version"}, wantStdout: "csi-test dev\n"},
		{name: "single dash version", args: []string{"-version"}, wantStdout: "csi-test dev\n"},
		{name: "help", args: []string{"-h"}, wantStdout: "-csi-address"},
		{name: "both endpoints", args: []string{"--http-endpoint=:1", "--metrics-address=:2"}, wantErr: "only one of --metrics-address and --http-endpoint"},
		{name: "unknown flag", args: []string{"--no-such-flag"}, wantErr: "no-such-flag"},
		{name: "stray argument before --version, which still counts", args: []string{"extra", "--version"}, wantStdout: "csi-test dev\n"},
		{name: "own validation", args: []string{"--sidecar-flag=bad"}, wantErr: "--sidecar-flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, out, run := ownFlagOptions(t, tt.args...)
			err := Run(context.Background(), o, run)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Run: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Run() = %v, want error containing %q", err, tt.wantErr)
			}
			if !strings.Contains(out.String(), tt.wantStdout) {
				t.Errorf("stdout %q lacks %q", out.String(), tt.wantStdout)
			}
		})
	}
}

func TestRunGivesEnvToControllers(t *testing.T) {
	resetLogging(t)
	driver := testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{
		Name:           "hostpath.csi.k8s.io",
		NotReadyProbes: 1,
		PluginServices: []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE},
		ControllerCaps: []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME},
	})
	o := options("-csi-address", driver.Address, "--kubeconfig", kubeconfig(t), "--http-endpoint=127.0.0.1:0",
		"--timeout=3s", "--worker-threads=4", "--retry-interval-max=1m", "-v=2")
	sentinel := errors.New("controllers stopped")
	var metricsURL string
	err := Run(context.Background(), o, func(ctx context.Context, env *Env) error {
		if env.DriverName != "hostpath.csi.k8s.io" {
			t.Errorf("driver name %q", env.DriverName)
		}
		if !env.PluginCaps.Has(csi.PluginCapability_Service_CONTROLLER_SERVICE) ||
			!env.ControllerCaps.Has(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME) {
			t.Errorf("capabilities %v %v", env.PluginCaps, env.ControllerCaps)
		}
		if env.Flags.WorkerThreads != 4 || env.CSI.Timeout() != 3*time.Second {
			t.Errorf("workers %d timeout %s", env.Flags.WorkerThreads, env.CSI.Timeout())
		}
		if env.Events == nil || env.Clients == nil || env.HTTP == nil {
			t.Fatal("env lacks events, clients or the HTTP server")
		}
		q, err := workqueue.New[string](env.Queues, env.QueueConfig("csi-test-va"))
		if err != nil {
			t.Fatal(err)
		}
		defer q.ShutDown()
		q.Add("va")
		if _, err := workqueue.New[string](env.Queues, env.QueueConfig("csi-test-va")); err == nil {
			t.Error("a second queue with the same name was accepted")
		}

		metricsURL = env.HTTP.URL("/metrics")
		resp, err := http.Get(metricsURL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, want := range []string{
			`csi_sidecar_operations_seconds_count{driver_name="hostpath.csi.k8s.io",grpc_status_code="OK",method_name="/csi.v1.Controller/ControllerGetCapabilities"} 1`,
			`workqueue_adds_total{name="csi-test-va"} 1`,
			"process_start_time_seconds",
		} {
			if !strings.Contains(string(body), want) {
				t.Errorf("metrics lack %s", want)
			}
		}
		if resp, err := http.Get(env.HTTP.URL("/healthz/leader-election")); err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("leader election health check served without leader election: %d", resp.StatusCode)
			}
		}
		return sentinel
	})
	if !errors.Is(err, sentinel) {
		t.Fatalf("Run() = %v, want the controllers' error", err)
	}
	if _, err := http.Get(metricsURL); err == nil {
		t.Error("HTTP endpoint still serving after Run returned")
	}
}

func TestRunShutsDownCleanlyWhileWaitingForDriver(t *testing.T) {
	resetLogging(t)
	driver := testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{Name: "d", NotReadyProbes: 1 << 30})
	o := options("--csi-address", driver.Address, "--kubeconfig", kubeconfig(t))
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() {
		result <- Run(ctx, o,
			func(context.Context, *Env) error {
				t.Error("run was called for a driver that never became ready")
				return nil
			})
	}()
	testutil.Eventually(t, 30*time.Second, "a probe of the driver", func() (bool, error) { return driver.ProbeCount() > 0, nil })
	cancel()
	if err := returned(t, result, "after cancel"); err != nil {
		t.Fatalf("Run() = %v after cancel during start-up, want nil", err)
	}
}

// returned waits for Run's result; a Run that does not return within 30 s fails the test, saying when it
// should have.
func returned(t *testing.T, result <-chan error, when string) error {
	t.Helper()
	select {
	case err := <-result:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return %s", when)
		return nil
	}
}

// A flag accepted for compatibility but without effect is named in a warning at start-up when the command line
// sets it, and only then.
func TestRunWarnsAboutFlagsWithoutEffect(t *testing.T) {
	resetLogging(t)
	driver := testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{Name: "d"})
	o := options("--csi-address", driver.Address, "--kubeconfig", kubeconfig(t), "--sweep-interval=1m")
	o.AddFlags = func(fs *flag.FlagSet, _ *flags.Common) {
		fs.Duration("sweep-interval", time.Minute, "accepted, ignored")
		fs.Duration("base-delay", time.Second, "accepted, ignored")
	}
	o.NoEffect = map[string]string{"sweep-interval": "no sweep runs", "base-delay": "no delays"}
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	sentinel := errors.New("controllers stopped")
	if err := Run(klog.NewContext(context.Background(), logger), o, func(context.Context, *Env) error { return sentinel }); !errors.Is(err, sentinel) {
		t.Fatalf("Run() = %v, want the controllers' error", err)
	}
	mu.Lock()
	defer mu.Unlock()
	var warnings []string
	for _, l := range lines {
		if strings.Contains(l, "has no effect") {
			warnings = append(warnings, l)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `"flag"="--sweep-interval"`) || !strings.Contains(warnings[0], "no sweep runs") {
		t.Errorf("warnings %q, want one naming --sweep-interval and why (and none for the unset --base-delay)", warnings)
	}
}

func TestNewFlagSetHasStandardAndOwnFlags(t *testing.T) {
	o := options()
	var master string
	o.AddFlags = func(fs *flag.FlagSet, _ *flags.Common) { fs.StringVar(&master, "master", "", "API server URL") }
	fs, common, err := NewFlagSet(o)
	if err != nil {
		t.Fatal(err)
	}
	for name, def := range map[string]string{"timeout": "15s", "worker-threads": "10", "kubeconfig": "", "master": ""} {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("--%s missing", name)
			continue
		}
		if f.DefValue != def {
			t.Errorf("--%s default %q, want %q", name, f.DefValue, def)
		}
	}
	if err := fs.Parse([]string{"--timeout=2s", "--master=https://127.0.0.1:7443"}); err != nil {
		t.Fatal(err)
	}
	if common.Timeout != 2*time.Second || master != "https://127.0.0.1:7443" {
		t.Errorf("parsed timeout %s, master %q", common.Timeout, master)
	}
}

// The sidecar's own --master value reaches the clients: it overrides the kubeconfig's server.
func TestRunBuildsClientsWithMaster(t *testing.T) {
	resetLogging(t)
	driver := testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{Name: "d"})
	o := options("--csi-address", driver.Address, "--kubeconfig", kubeconfig(t), "--master=https://127.0.0.1:7443")
	var master string
	o.AddFlags = func(fs *flag.FlagSet, _ *flags.Common) { fs.StringVar(&master, "master", "", "API server URL") }
	o.Master = func() string { return master }
	sentinel := errors.New("controllers stopped")
	err := Run(context.Background(), o, func(_ context.Context, env *Env) error {
		if got := env.Clients.Config.Host; got != "https://127.0.0.1:7443" {
			t.Errorf("client host %q, want --master's", got)
		}
		if env.Clients.Config.BearerToken != "t" {
			t.Error("--master dropped the kubeconfig's credentials")
		}
		return sentinel
	})
	if !errors.Is(err, sentinel) {
		t.Fatalf("Run() = %v, want the controllers' error", err)
	}
}

// Prepare runs on a replica that is not (yet) the leader: its handlers are served and an error from it ends
// start-up. The API server is unreachable, so this replica can never win the election.
func TestRunPreparesBeforeLeaderElection(t *testing.T) {
	driver := testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{
		Name:           "hostpath.csi.k8s.io",
		PluginServices: []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE},
		ControllerCaps: []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME},
	})
	args := []string{"--csi-address", driver.Address, "--kubeconfig", kubeconfig(t), "--http-endpoint=127.0.0.1:0",
		"--leader-election", "--leader-election-namespace=default", "--leader-election-retry-period=100ms"}
	notLeader := func(context.Context, *Env) error {
		t.Error("run was called on a replica that cannot lead")
		return nil
	}

	t.Run("handlers are served on a standby", func(t *testing.T) {
		resetLogging(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		o := options(args...)
		urls := make(chan string, 1)
		o.Prepare = func(_ context.Context, env *Env) error {
			if env.DriverName != "hostpath.csi.k8s.io" || !env.ControllerCaps.Has(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME) {
				t.Errorf("Prepare got driver %q, capabilities %v", env.DriverName, env.ControllerCaps)
			}
			if env.Events == nil || env.Clients == nil || env.HTTP == nil {
				t.Error("Prepare's env lacks events, clients or the HTTP server")
				return errors.New("incomplete env")
			}
			env.HTTP.Handle("/debug/standby", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, "standby")
			}))
			urls <- env.HTTP.URL("/debug/standby")
			return nil
		}
		result := make(chan error, 1)
		go func() { result <- Run(ctx, o, notLeader) }()
		var url string
		select {
		case url = <-urls:
		case err := <-result:
			t.Fatalf("Run() = %v before Prepare", err)
		}
		var body string
		testutil.Eventually(t, 10*time.Second, "Prepare's handler served on the standby", func() (bool, error) {
			resp, err := http.Get(url)
			if err != nil {
				return false, err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			body = string(b)
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d: %q", resp.StatusCode, body)
			}
			return err == nil, err
		})
		if body != "standby" {
			t.Errorf("handler answered %q", body)
		}
		cancel()
		if err := returned(t, result, "after cancel"); err != nil {
			t.Fatalf("Run() = %v after cancel on a standby, want nil", err)
		}
	})

	t.Run("an error stops start-up", func(t *testing.T) {
		resetLogging(t)
		o := options(args...)
		refused := errors.New("driver refused")
		o.Prepare = func(context.Context, *Env) error { return refused }
		result := make(chan error, 1)
		go func() { result <- Run(context.Background(), o, notLeader) }()
		if err := returned(t, result, "after Prepare failed (it joined the election)"); !errors.Is(err, refused) {
			t.Fatalf("Run() = %v, want Prepare's error", err)
		}
	})
}

// A gate that Stowage accepts but ignores is named in one start-up warning when set away from its default; a
// gate set to its default, or one Stowage honours, is not.
func TestWarnIgnoredGates(t *testing.T) {
	o := options("--feature-gates=Ignored=false,Honoured=false,QuietIgnored=false")
	o.Defaults.Gates = []flags.Gate{
		{Name: "Ignored", Spec: featuregate.FeatureSpec{Default: true, PreRelease: featuregate.GA}, NoEffect: "always on in Stowage"},
		{Name: "QuietIgnored", Spec: featuregate.FeatureSpec{Default: false, PreRelease: featuregate.Alpha}, NoEffect: "not implemented"},
		{Name: "Honoured", Spec: featuregate.FeatureSpec{Default: true, PreRelease: featuregate.GA}},
	}
	fs, common, err := NewFlagSet(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse(o.Args); err != nil {
		t.Fatal(err)
	}
	var lines []string
	logger := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})
	warnIgnoredGates(logger, common, o.Defaults.Gates)
	if len(lines) != 1 || !strings.Contains(lines[0], `"featureGate"="Ignored=false"`) || !strings.Contains(lines[0], "always on in Stowage") {
		t.Errorf("warnings %q, want one naming Ignored=false and why", lines)
	}
}
