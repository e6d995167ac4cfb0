package app

import (
	"bytes"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// upstreamFlags are the flags of upstream's snapshot-controller v8.7.0 (cmd/snapshot-controller/main.go,
// csi-lib-utils standardflags.AddAutomaxprocs and component-base's logging flags), and no others: a Deployment
// written for upstream must start this binary, and none written for it may set a flag upstream lacks.
var upstreamFlags = []string{
	"automaxprocs", "enable-distributed-snapshotting", "feature-gates", "http-endpoint", "kube-api-burst", "kube-api-qps",
	"kubeconfig", "leader-election", "leader-election-lease-duration", "leader-election-namespace",
	"leader-election-renew-deadline", "leader-election-retry-period", "metrics-path", "prevent-volume-mode-conversion",
	"resync-period", "retry-crd-interval-max", "retry-interval-max", "retry-interval-start", "version", "worker-threads",
}

func TestFlagsAreUpstreams(t *testing.T) {
	fs, _, err := NewFlagSet()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	fs.VisitAll(func(f *flag.Flag) {
		// component-base's logging flags (-v, --vmodule, --logging-format, --log-*) come with every upstream main.
		if f.Name == "v" || f.Name == "vmodule" || f.Name == "logging-format" || strings.HasPrefix(f.Name, "log-") {
			return
		}
		got = append(got, f.Name)
	})
	slices.Sort(got)
	if diff := cmp.Diff(upstreamFlags, got); diff != "" {
		t.Errorf("flags (-upstream +stowage):\n%s", diff)
	}
	for _, absent := range []string{"csi-address", "metrics-address", "leader-election-labels", "timeout"} {
		if fs.Lookup(absent) != nil {
			t.Errorf("--%s is registered; upstream's snapshot-controller has no such flag", absent)
		}
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := Parse(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := struct {
		Resync, LeaseDuration, RenewDeadline, RetryPeriod, RetryStart, RetryMax, CRDMax time.Duration
		Workers, Burst                                                                  int
		QPS                                                                             float64
		MetricsPath                                                                     string
		PreventModeConversion, Distributed, LeaderElection                              bool
	}{15 * time.Minute, 15 * time.Second, 10 * time.Second, 5 * time.Second, time.Second, 5 * time.Minute, 30 * time.Second,
		10, 100, 20, "/metrics", true, false, false}
	got := want
	got.Resync, got.LeaseDuration, got.RenewDeadline, got.RetryPeriod = cfg.ResyncPeriod, cfg.LeaderElectionLeaseDuration, cfg.LeaderElectionRenewDeadline, cfg.LeaderElectionRetryPeriod
	got.RetryStart, got.RetryMax, got.CRDMax = cfg.RetryIntervalStart, cfg.RetryIntervalMax, cfg.RetryCRDIntervalMax
	got.Workers, got.Burst, got.QPS, got.MetricsPath = cfg.WorkerThreads, cfg.KubeAPIBurst, cfg.KubeAPIQPS, cfg.MetricsPath
	got.PreventModeConversion, got.Distributed, got.LeaderElection = cfg.PreventVolumeModeConversion, cfg.EnableDistributedSnapshotting, cfg.LeaderElection
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if !cfg.FeatureGates.Enabled(CSIVolumeGroupSnapshot) {
		t.Error("CSIVolumeGroupSnapshot is off by default; upstream's is GA and on")
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"upstream's manifest args", []string{"--v=2", "--leader-election=true", "--kube-api-qps=5", "--kube-api-burst=10"}, ""},
		{"known gates", []string{"--feature-gates=CSIVolumeGroupSnapshot=false,ReleaseLeaderElectionOnExit=true"}, ""},
		{"unknown gate", []string{"--feature-gates=NoSuchGate=true"}, "unrecognized feature gate: NoSuchGate"},
		{"csi-address is not a flag here", []string{"--csi-address=/run/csi/socket"}, "flag provided but not defined: -csi-address"},
		{"no workers", []string{"--worker-threads=0"}, "--worker-threads must be at least 1"},
		{"bad retry", []string{"--retry-interval-start=10m", "--retry-interval-max=1m"}, "--retry-interval-start (10m0s) must not exceed --retry-interval-max (1m0s)"},
		{"stray argument, as upstream tolerates", []string{"extra", "--leader-election=true"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.args, &bytes.Buffer{})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	cfg, err := Parse([]string{"--version"}, &out)
	if err != nil || cfg != nil {
		t.Fatalf("Parse(--version) = %v, %v; want nothing to run", cfg, err)
	}
	if !strings.HasPrefix(out.String(), "snapshot-controller ") {
		t.Errorf("--version printed %q", out.String())
	}
}
