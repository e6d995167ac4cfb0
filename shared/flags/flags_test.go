package flags

import (
	"flag"
	"io"
	"maps"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/featuregate"
)

func newFlags(t *testing.T, d Defaults) (*flag.FlagSet, *Common) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, err := Register(fs, d)
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	return fs, c
}

func TestRegisterNamesAndDefaults(t *testing.T) {
	fs, _ := newFlags(t, Defaults{Timeout: 15 * time.Second, WorkerThreads: 10})
	want := map[string]string{
		"version":                        "false",
		"kubeconfig":                     "",
		"csi-address":                    "/run/csi/socket",
		"leader-election":                "false",
		"leader-election-namespace":      "",
		"leader-election-lease-duration": "15s",
		"leader-election-renew-deadline": "10s",
		"leader-election-retry-period":   "5s",
		"leader-election-labels":         "",
		"kube-api-qps":                   "20",
		"kube-api-burst":                 "100",
		"http-endpoint":                  "",
		"metrics-address":                "",
		"metrics-path":                   "/metrics",
		"timeout":                        "15s",
		"worker-threads":                 "10",
		"retry-interval-start":           "1s",
		"retry-interval-max":             "5m0s",
		"automaxprocs":                   "false",
		"v":                              "0",
		"vmodule":                        "",
		"logging-format":                 "text",
	}
	for name, def := range want {
		t.Run(name, func(t *testing.T) {
			f := fs.Lookup(name)
			if f == nil {
				t.Fatalf("flag --%s is not registered", name)
			}
			if f.DefValue != def {
				t.Errorf("--%s default = %q, want %q", name, f.DefValue, def)
			}
		})
	}
	if fs.Lookup("feature-gates") == nil {
		t.Error("flag --feature-gates is not registered")
	}
}

func TestQPSAndBurstDeviateFromUpstream(t *testing.T) {
	// Upstream's 5/10 limits provisioning to a few volumes a second (see DefaultKubeAPIQPS); Stowage's defaults
	// must stay above them.
	const upstreamQPS, upstreamBurst = 5.0, 10
	_, c := newFlags(t, Defaults{Timeout: time.Second, WorkerThreads: 1})
	if c.KubeAPIQPS != 20 || c.KubeAPIBurst != 100 {
		t.Errorf("qps/burst = %v/%d, want 20/100", c.KubeAPIQPS, c.KubeAPIBurst)
	}
	if c.KubeAPIQPS <= upstreamQPS || c.KubeAPIBurst <= upstreamBurst {
		t.Errorf("qps/burst %v/%d must exceed upstream's %v/%d", c.KubeAPIQPS, c.KubeAPIBurst, upstreamQPS, upstreamBurst)
	}
}

func TestPerSidecarDefaults(t *testing.T) {
	tests := []struct {
		name     string
		defaults Defaults
	}{
		{"attacher", Defaults{Timeout: 15 * time.Second, WorkerThreads: 10}},
		{"provisioner", Defaults{Timeout: 10 * time.Second, WorkerThreads: 100}},
		{"snapshotter", Defaults{Timeout: time.Minute, WorkerThreads: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c := newFlags(t, tt.defaults)
			if c.Timeout != tt.defaults.Timeout || c.WorkerThreads != tt.defaults.WorkerThreads {
				t.Errorf("timeout/workers = %s/%d, want %s/%d", c.Timeout, c.WorkerThreads, tt.defaults.Timeout, tt.defaults.WorkerThreads)
			}
		})
	}
}

func TestParseBothDashForms(t *testing.T) {
	fs, c := newFlags(t, Defaults{Timeout: time.Second, WorkerThreads: 1})
	args := []string{
		"-csi-address=/tmp/csi.sock", "--kubeconfig", "/k", "--leader-election",
		"-leader-election-labels=a:b,c.io/d:e", "--leader-election-labels", "f:g",
		"--kube-api-qps=7.5", "-kube-api-burst=9", "--http-endpoint=:8080", "-v=4",
		"--feature-gates=ReleaseLeaderElectionOnExit=false", "--logging-format=json",
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.CSIAddress != "/tmp/csi.sock" || c.Kubeconfig != "/k" || !c.LeaderElection {
		t.Errorf("csi-address/kubeconfig/leader-election = %q/%q/%v", c.CSIAddress, c.Kubeconfig, c.LeaderElection)
	}
	if got := c.LeaderElectionLabels.String(); got != "a:b,c.io/d:e,f:g" {
		t.Errorf("labels = %q", got)
	}
	if c.KubeAPIQPS != 7.5 || c.KubeAPIBurst != 9 || c.Endpoint() != ":8080" {
		t.Errorf("qps/burst/endpoint = %v/%d/%q", c.KubeAPIQPS, c.KubeAPIBurst, c.Endpoint())
	}
	if c.Logging.Verbosity != 4 || c.Logging.Format != "json" {
		t.Errorf("verbosity/format = %d/%q", c.Logging.Verbosity, c.Logging.Format)
	}
	if c.FeatureGates.Enabled(ReleaseLeaderElectionOnExit) {
		t.Error("ReleaseLeaderElectionOnExit still enabled after =false")
	}
}

func TestReleaseOnExitGateDefaultsOn(t *testing.T) {
	_, c := newFlags(t, Defaults{Timeout: time.Second, WorkerThreads: 1})
	if !c.FeatureGates.Enabled(ReleaseLeaderElectionOnExit) {
		t.Error("ReleaseLeaderElectionOnExit is off by default, want on")
	}
}

func TestLabelsRejectMalformed(t *testing.T) {
	tests := []string{"novalue", "a:b:c", ":v", "bad key:v", "k:bad value", "a:b,"}
	for _, value := range tests {
		t.Run(value, func(t *testing.T) {
			var l Labels
			err := l.Set(value)
			if err == nil {
				t.Fatalf("Set(%q) succeeded, want error", value)
			}
			if !strings.Contains(err.Error(), "--leader-election-labels") {
				t.Errorf("error %q does not name the flag", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantFlag string // empty: valid
	}{
		{name: "defaults", args: nil},
		{name: "metrics-address alone", args: []string{"--metrics-address=:9090"}},
		{name: "http-endpoint and metrics-address", args: []string{"--http-endpoint=:8080", "--metrics-address=:9090"}, wantFlag: "only one of --metrics-address and --http-endpoint"},
		{name: "retry start above max", args: []string{"--retry-interval-start=10m"}, wantFlag: "--retry-interval-start"},
		{name: "zero retry start", args: []string{"--retry-interval-start=0s"}, wantFlag: "--retry-interval-start must be positive"},
		{name: "renew deadline not below lease", args: []string{"--leader-election-renew-deadline=15s"}, wantFlag: "--leader-election-renew-deadline (15s) must be less than"},
		{name: "renew deadline below jittered retry", args: []string{"--leader-election-retry-period=9s"}, wantFlag: "1.2 x --leader-election-retry-period"},
		{name: "negative lease", args: []string{"--leader-election-lease-duration=-1s"}, wantFlag: "--leader-election-lease-duration must be positive"},
		{name: "zero timeout", args: []string{"--timeout=0s"}, wantFlag: "--timeout must be positive"},
		{name: "zero workers", args: []string{"--worker-threads=0"}, wantFlag: "--worker-threads"},
		{name: "zero burst", args: []string{"--kube-api-burst=0"}, wantFlag: "--kube-api-burst"},
		{name: "empty csi address", args: []string{"--csi-address="}, wantFlag: "--csi-address"},
		{name: "relative metrics path", args: []string{"--metrics-path=metrics"}, wantFlag: "--metrics-path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, c := newFlags(t, Defaults{Timeout: 15 * time.Second, WorkerThreads: 10})
			if err := fs.Parse(tt.args); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			err := c.Validate()
			if tt.wantFlag == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantFlag) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantFlag)
			}
		})
	}
}

func FuzzLabelsSet(f *testing.F) {
	for _, seed := range []string{"a:b", "a:b,c.io/d:e", "", ":", "a:b:c", "k:", "x/y/z:v", "a:b,a:c"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		var l Labels
		if err := l.Set(value); err != nil {
			return
		}
		// Whatever parses must print back to something that parses to the same labels.
		var again Labels
		if err := again.Set(l.String()); err != nil && len(l) > 0 {
			t.Fatalf("String() %q of parsed %q does not parse: %v", l.String(), value, err)
		}
		if len(l) > 0 && again.String() != l.String() {
			t.Fatalf("round trip %q -> %q -> %q", value, l.String(), again.String())
		}
	})
}

// A sidecar's own gates are accepted beside the common ones, keep their defaults until set, and an unknown gate
// fails naming it, as upstream's sidecars fail.
func TestFeatureGates(t *testing.T) {
	const own featuregate.Feature = "OwnGate"
	d := Defaults{Timeout: time.Second, WorkerThreads: 1, Gates: []Gate{
		{Name: own, Spec: featuregate.FeatureSpec{Default: true, PreRelease: featuregate.GA}},
	}}
	tests := []struct {
		name    string
		arg     string
		wantErr string // substring; "" means parsing succeeds
		want    map[featuregate.Feature]bool
	}{
		{name: "defaults", want: map[featuregate.Feature]bool{own: true, ReleaseLeaderElectionOnExit: true}},
		{name: "own gate off", arg: "OwnGate=false", want: map[featuregate.Feature]bool{own: false}},
		{name: "common and logging gates", arg: "ReleaseLeaderElectionOnExit=false,ContextualLogging=true,LoggingAlphaOptions=true,LoggingBetaOptions=true",
			want: map[featuregate.Feature]bool{ReleaseLeaderElectionOnExit: false, "ContextualLogging": true, "LoggingAlphaOptions": true}},
		{name: "AllAlpha and AllBeta", arg: "AllAlpha=false,AllBeta=false", want: map[featuregate.Feature]bool{own: true}},
		{name: "unknown gate", arg: "OwnGate=true,NoSuchGate=true", wantErr: "unrecognized feature gate: NoSuchGate"},
		{name: "another sidecar's gate", arg: "Topology=true", wantErr: "unrecognized feature gate: Topology"},
		{name: "not a bool", arg: "OwnGate=maybe", wantErr: "OwnGate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, c := newFlags(t, d)
			var args []string
			if tt.arg != "" {
				args = []string{"--feature-gates=" + tt.arg}
			}
			err := fs.Parse(args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) = %v, want an error containing %q", args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", args, err)
			}
			for gate, want := range tt.want {
				if got := c.FeatureGates.Enabled(gate); got != want {
					t.Errorf("%s = %t, want %t", gate, got, want)
				}
			}
		})
	}
}

func TestRegisterRejectsDuplicateGate(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	_, err := Register(fs, Defaults{Gates: []Gate{{Name: ReleaseLeaderElectionOnExit}}})
	if err == nil || !strings.Contains(err.Error(), "ReleaseLeaderElectionOnExit") {
		t.Fatalf("Register = %v, want an error naming the duplicate gate", err)
	}
}

// Only a gate Stowage ignores, set away from its default, is reported.
func TestIgnoredGates(t *testing.T) {
	gates := []Gate{
		{Name: "Honoured", Spec: featuregate.FeatureSpec{Default: true, PreRelease: featuregate.GA}},
		{Name: "IgnoredOn", Spec: featuregate.FeatureSpec{Default: true, PreRelease: featuregate.GA}, NoEffect: "always on"},
		{Name: "IgnoredOff", Spec: featuregate.FeatureSpec{Default: false, PreRelease: featuregate.Alpha}, NoEffect: "not implemented"},
	}
	tests := []struct {
		arg  string
		want map[string]string
	}{
		{arg: "", want: map[string]string{}},
		{arg: "IgnoredOn=true,IgnoredOff=false,Honoured=false", want: map[string]string{}},
		{arg: "IgnoredOn=false", want: map[string]string{"IgnoredOn=false": "always on"}},
		{arg: "AllAlpha=true", want: map[string]string{"IgnoredOff=true": "not implemented"}},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			fs, c := newFlags(t, Defaults{Timeout: time.Second, WorkerThreads: 1, Gates: gates})
			if err := fs.Parse([]string{"--feature-gates=" + tt.arg}); err != nil {
				t.Fatal(err)
			}
			got := c.IgnoredGates(gates)
			// AllAlpha turns on the API server's alpha gates too, which are reported with their own reason.
			maps.DeleteFunc(got, func(_, why string) bool { return why == serverGateNoEffect })
			if !maps.Equal(got, tt.want) {
				t.Errorf("IgnoredGates = %v, want %v", got, tt.want)
			}
		})
	}
}

// Upstream's sidecars accept the API server's gates on --feature-gates (they share k8s.io/apiserver's
// registry); manifests set e.g. WatchList=false. Stowage accepts them, warns that they change nothing, and
// keeps their locks.
func TestAPIServerGatesAreAcceptedAndReported(t *testing.T) {
	fs, c := newFlags(t, Defaults{Timeout: time.Second, WorkerThreads: 1})
	if err := fs.Parse([]string{"--feature-gates=WatchList=false,APIResponseCompression=true"}); err != nil {
		t.Fatalf("upstream's WatchList gate refused: %v", err)
	}
	got := c.IgnoredGates(nil)
	if got["WatchList=false"] != serverGateNoEffect {
		t.Errorf("IgnoredGates = %v, want WatchList=false reported as an API server gate", got)
	}
	if _, ok := got["APIResponseCompression=true"]; ok {
		t.Errorf("a server gate set to its default is reported: %v", got)
	}
	if c.FeatureGates.Enabled(ReleaseLeaderElectionOnExit) != true {
		t.Error("the server gates replaced Stowage's own default for ReleaseLeaderElectionOnExit")
	}
	fs, _ = newFlags(t, Defaults{Timeout: time.Second, WorkerThreads: 1})
	if err := fs.Parse([]string{"--feature-gates=NoSuchGate=true"}); err == nil {
		t.Error("an unknown gate was accepted")
	}
}

func TestParsedNotesTheRateFlags(t *testing.T) {
	for args, want := range map[string]bool{"": false, "--kube-api-qps=5": true, "--kube-api-burst=10": true, "--timeout=5s": false} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		c, err := Register(fs, Defaults{})
		if err != nil {
			t.Fatal(err)
		}
		var argv []string
		if args != "" {
			argv = []string{args}
		}
		if err := fs.Parse(argv); err != nil {
			t.Fatal(err)
		}
		c.Parsed(fs)
		if c.KubeAPIRateSet != want {
			t.Errorf("%q: KubeAPIRateSet = %v, want %v", args, c.KubeAPIRateSet, want)
		}
	}
}

// A binary whose upstream lacks some shared flags (snapshot-controller) leaves them out: setting one fails as
// upstream's would, and their zero values do not fail validation.
func TestWithout(t *testing.T) {
	fs, c := newFlags(t, Defaults{WorkerThreads: 10, Without: []string{"csi-address", "timeout", "metrics-address", "leader-election-labels"}})
	for _, name := range []string{"csi-address", "timeout", "metrics-address", "leader-election-labels"} {
		if fs.Lookup(name) != nil {
			t.Errorf("--%s is registered", name)
		}
	}
	if f := fs.Lookup("leader-election"); f == nil || f.DefValue != "false" {
		t.Errorf("--leader-election = %+v, want it registered with default false", f)
	}
	if err := fs.Parse([]string{"--leader-election", "--worker-threads=3"}); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if !c.LeaderElection || c.WorkerThreads != 3 {
		t.Errorf("parsed LeaderElection=%v WorkerThreads=%d, want true 3", c.LeaderElection, c.WorkerThreads)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate without --csi-address and --timeout: %v", err)
	}
	if err := fs.Parse([]string{"--timeout=1s"}); err == nil {
		t.Error("--timeout parsed, want it undefined")
	}
	c.WorkerThreads = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--worker-threads") {
		t.Errorf("Validate with no workers: %v, want an error naming --worker-threads", err)
	}
}
