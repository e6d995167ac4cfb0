package app

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/component-base/featuregate"

	"github.com/stowage-csi/stowage/attacher/internal/handler"
	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/flags"
	"github.com/stowage-csi/stowage/shared/sidecar"
)

func TestCapabilitiesChooseTheHandler(t *testing.T) {
	type rpc = csi.ControllerServiceCapability_RPC_Type
	withController := csiconn.PluginCapabilities{Services: csiconn.Set[csi.PluginCapability_Service_Type]{csi.PluginCapability_Service_CONTROLLER_SERVICE: {}}}
	set := func(caps ...rpc) csiconn.ControllerCapabilities {
		s := csiconn.ControllerCapabilities{}
		for _, c := range caps {
			s[c] = struct{}{}
		}
		return s
	}
	tests := []struct {
		name          string
		plugin        csiconn.PluginCapabilities
		ctrl          csiconn.ControllerCapabilities
		wantPublishes bool
		wantCaps      handler.Capabilities
	}{
		{name: "no controller service: trivial handler", ctrl: set(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME)},
		{name: "controller without ControllerPublish: trivial handler", plugin: withController, ctrl: set(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME)},
		{name: "ControllerPublish only", plugin: withController, ctrl: set(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME), wantPublishes: true},
		{name: "every capability the attacher uses", plugin: withController,
			ctrl: set(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME, csi.ControllerServiceCapability_RPC_PUBLISH_READONLY,
				csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER, csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
				csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES),
			wantPublishes: true,
			wantCaps:      handler.Capabilities{PublishReadOnly: true, SingleNodeMultiWriter: true, ListPublishedNodes: true}},
		{name: "LIST_VOLUMES without published nodes: no reconcile", plugin: withController,
			ctrl:          set(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME, csi.ControllerServiceCapability_RPC_LIST_VOLUMES),
			wantPublishes: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			publishes, caps := capabilities(tc.plugin, tc.ctrl)
			if publishes != tc.wantPublishes || caps != tc.wantCaps {
				t.Errorf("capabilities = %v, %+v; want %v, %+v", publishes, caps, tc.wantPublishes, tc.wantCaps)
			}
		})
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(t *testing.T, c Config)
		wantErr bool
	}{
		{name: "upstream's defaults", check: func(t *testing.T, c Config) {
			if c.Resync != 10*time.Minute || c.ReconcileSync != time.Minute || c.MaxEntries != 0 || c.DefaultFSType != "" || c.MaxGRPCLogLength != -1 {
				t.Errorf("defaults = %+v", c)
			}
		}},
		{name: "values are parsed", args: []string{"--resync=1m", "--max-entries=50", "--default-fstype=xfs", "--reconcile-sync=30s"},
			check: func(t *testing.T, c Config) {
				if c.Resync != time.Minute || c.MaxEntries != 50 || c.DefaultFSType != "xfs" || c.ReconcileSync != 30*time.Second {
					t.Errorf("parsed = %+v", c)
				}
			}},
		{name: "negative max-entries", args: []string{"--max-entries=-1"}, wantErr: true},
		{name: "negative reconcile-sync", args: []string{"--reconcile-sync=-1s"}, wantErr: true},
		{name: "negative resync", args: []string{"--resync=-1s"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			common, err := flags.Register(fs, Defaults)
			if err != nil {
				t.Fatal(err)
			}
			var cfg Config
			cfg.AddFlags(fs, common)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); (err != nil) != tc.wantErr {
				t.Fatalf("Validate = %v, want error %v", err, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, cfg)
			}
			if common.Timeout != DefaultTimeout || common.WorkerThreads != DefaultWorkerThreads {
				t.Errorf("--timeout %s, --worker-threads %d; want 15s and 10", common.Timeout, common.WorkerThreads)
			}
		})
	}
}

// Upstream's exact csi-attacher arguments (aws-ebs-csi-driver's manifest) parse, its gates are accepted and
// honoured, and an unknown gate fails naming it, as upstream's attacher fails.
func TestUpstreamArgsAndFeatureGates(t *testing.T) {
	upstream := []string{"--timeout=6m", "--csi-address=/var/lib/csi/sockets/pluginproxy/csi.sock", "--v=2", "--leader-election=true",
		"--kube-api-qps=20", "--kube-api-burst=100", "--worker-threads=100", "--retry-interval-max=5m",
		"--feature-gates=MutableCSINodeAllocatableCount=true"}
	tests := []struct {
		name    string
		args    []string
		wantErr string
		want    map[featuregate.Feature]bool
	}{
		{name: "upstream's manifest", args: upstream, want: map[featuregate.Feature]bool{MutableCSINodeAllocatableCount: true, flags.ReleaseLeaderElectionOnExit: true}},
		{name: "defaults", want: map[featuregate.Feature]bool{MutableCSINodeAllocatableCount: true}},
		{name: "every upstream gate", args: []string{"--feature-gates=MutableCSINodeAllocatableCount=false,ReleaseLeaderElectionOnExit=false,ContextualLogging=true,LoggingBetaOptions=true"},
			want: map[featuregate.Feature]bool{MutableCSINodeAllocatableCount: false, flags.ReleaseLeaderElectionOnExit: false}},
		{name: "unknown gate", args: []string{"--feature-gates=MutableCSINodeAllocatableCount=true,NoSuchGate=true"}, wantErr: "unrecognized feature gate: NoSuchGate"},
		{name: "provisioner's gate", args: []string{"--feature-gates=Topology=true"}, wantErr: "unrecognized feature gate: Topology"},
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
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if err := common.Validate(); err != nil {
				t.Fatal(err)
			}
			for gate, want := range tc.want {
				if got := common.FeatureGates.Enabled(gate); got != want {
					t.Errorf("%s = %t, want %t", gate, got, want)
				}
			}
		})
	}
}
