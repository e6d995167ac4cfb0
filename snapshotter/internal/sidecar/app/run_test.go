package app

import (
	"strings"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/shared/sidecar"
)

func parse(t *testing.T, args ...string) (*Config, error) {
	t.Helper()
	var cfg Config
	fs, common, err := sidecar.NewFlagSet(sidecar.Options{Binary: Binary, Defaults: Defaults, AddFlags: cfg.AddFlags})
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := common.Validate(); err != nil {
		return nil, err
	}
	return &cfg, cfg.Validate()
}

// The upstream manifest's args (aws-ebs-csi-driver) must parse, and the defaults must be upstream's.
func TestUpstreamArgsAndDefaults(t *testing.T) {
	cfg, err := parse(t, "--csi-address=/csi/csi.sock", "--leader-election=true", "--v=2", "--extra-create-metadata",
		"--kube-api-qps=20", "--kube-api-burst=100", "--worker-threads=100", "--retry-interval-max=30m",
		"--feature-gates=CSIVolumeGroupSnapshot=true,ReleaseLeaderElectionOnExit=true")
	if err != nil {
		t.Fatalf("upstream args refused: %v", err)
	}
	if !cfg.ExtraCreateMetadata || cfg.Resync != 15*time.Minute || cfg.SnapshotNamePrefix != "snapshot" ||
		cfg.SnapshotNameUUIDLength != -1 || cfg.GroupSnapshotNamePrefix != "groupsnapshot" || cfg.GroupSnapshotNameUUIDLength != -1 {
		t.Errorf("config = %+v, want upstream's defaults with --extra-create-metadata", cfg)
	}
	if cfg.common.Timeout != time.Minute || cfg.common.WorkerThreads != 100 {
		t.Errorf("timeout %s, workers %d; want 1m and 100", cfg.common.Timeout, cfg.common.WorkerThreads)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     string
		wantErr string
	}{
		{name: "empty prefix", args: []string{"--snapshot-name-prefix="}, wantErr: "--snapshot-name-prefix"},
		{name: "bad uuid length", args: []string{"--snapshot-name-uuid-length=-2"}, wantErr: "--snapshot-name-uuid-length"},
		{name: "unknown gate", args: []string{"--feature-gates=NoSuchGate=true"}, wantErr: "NoSuchGate"},
		{name: "node deployment without NODE_NAME", args: []string{"--node-deployment"}, wantErr: NodeNameEnv},
		{name: "node deployment with leader election", args: []string{"--node-deployment", "--leader-election"}, env: "node-1", wantErr: "--leader-election"},
		{name: "node deployment", args: []string{"--node-deployment"}, env: "node-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(NodeNameEnv, tt.env)
			cfg, err := parse(t, tt.args...)
			if tt.wantErr == "" {
				if err != nil || cfg.nodeName != tt.env {
					t.Fatalf("err = %v, node %q; want no error and node %q", err, cfg.nodeName, tt.env)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want one naming %s", err, tt.wantErr)
			}
		})
	}
}
