package app

import (
	"io"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/featuregate"

	"github.com/stowage-csi/stowage/shared/flags"
	"github.com/stowage-csi/stowage/shared/sidecar"
)

// Upstream's exact csi-resizer arguments (aws-ebs-csi-driver's manifest) parse into what they say, upstream's
// defaults hold without them, its gates are accepted, and an unknown gate fails naming it.
func TestFlagsAndFeatureGates(t *testing.T) {
	upstream := []string{"--timeout=60s", "--extra-modify-metadata", "--csi-address=/var/lib/csi/sockets/pluginproxy/csi.sock", "--v=2",
		"--handle-volume-inuse-error=false", "--leader-election=true", "--kube-api-qps=20", "--kube-api-burst=100", "--workers=100",
		"--retry-interval-max=30m"}
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, c Config, common *flags.Common)
		gates   map[featuregate.Feature]bool
	}{
		{name: "upstream's manifest", args: upstream, check: func(t *testing.T, c Config, common *flags.Common) {
			if !c.ExtraModifyMetadata || c.HandleVolumeInUseError || common.WorkerThreads != 100 || common.Timeout != time.Minute ||
				common.RetryIntervalMax != 30*time.Minute || !common.LeaderElection {
				t.Errorf("parsed %+v, common %+v", c, common)
			}
		}},
		{name: "upstream's defaults", check: func(t *testing.T, c Config, common *flags.Common) {
			if c.ExtraModifyMetadata || !c.HandleVolumeInUseError || c.Resync != 10*time.Minute || c.Master != "" ||
				common.WorkerThreads != 10 || common.Timeout != 10*time.Second || common.RetryIntervalStart != time.Second || common.RetryIntervalMax != 5*time.Minute {
				t.Errorf("defaults %+v, common %+v", c, common)
			}
		}, gates: map[featuregate.Feature]bool{RecoverVolumeExpansionFailure: true, VolumeAttributesClass: true, AnnotateFsResize: true}},
		{name: "every upstream gate", args: []string{"--feature-gates=RecoverVolumeExpansionFailure=true,VolumeAttributesClass=false,AnnotateFsResize=false,ReleaseLeaderElectionOnExit=false"},
			gates: map[featuregate.Feature]bool{VolumeAttributesClass: false, AnnotateFsResize: false, flags.ReleaseLeaderElectionOnExit: false}},
		{name: "--master and --resync-period", args: []string{"--master=https://api:6443", "--resync-period=1m"}, check: func(t *testing.T, c Config, _ *flags.Common) {
			if c.Master != "https://api:6443" || c.Resync != time.Minute {
				t.Errorf("parsed %+v", c)
			}
		}},
		{name: "unknown gate", args: []string{"--feature-gates=NoSuchGate=true"}, wantErr: "unrecognized feature gate: NoSuchGate"},
		{name: "attacher's gate", args: []string{"--feature-gates=MutableCSINodeAllocatableCount=true"}, wantErr: "unrecognized feature gate: MutableCSINodeAllocatableCount"},
		{name: "negative resync", args: []string{"--resync-period=-1s"}, wantErr: "--resync-period"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cfg Config
			fs, common, err := sidecar.NewFlagSet(sidecar.Options{Binary: Binary, Defaults: Defaults, AddFlags: cfg.AddFlags})
			if err != nil {
				t.Fatal(err)
			}
			fs.SetOutput(io.Discard)
			err = fs.Parse(tc.args)
			if err == nil {
				err = cfg.Validate()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := common.Validate(); err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, cfg, common)
			}
			for gate, want := range tc.gates {
				if got := common.FeatureGates.Enabled(gate); got != want {
					t.Errorf("%s = %t, want %t", gate, got, want)
				}
			}
		})
	}
}
