package app

import (
	"io"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2/ktesting"

	"github.com/stowage-csi/stowage/shared/flags"
	"github.com/stowage-csi/stowage/shared/kubeclient"
	"github.com/stowage-csi/stowage/shared/sidecar"
)

// upstreamArgs are the csi-provisioner arguments of aws-ebs-csi-driver's manifest, exactly.
var upstreamArgs = []string{"--timeout=60s", "--csi-address=/var/lib/csi/sockets/pluginproxy/csi.sock", "--v=2",
	"--feature-gates=Topology=true", "--extra-create-metadata", "--leader-election=true", "--default-fstype=ext4",
	"--kube-api-qps=20", "--kube-api-burst=100", "--worker-threads=100", "--retry-interval-max=30m"}

// parseCommon parses args with the flag set sidecar.Run uses and returns the standard flags.
func parseCommon(t *testing.T, args ...string) (*flags.Common, error) {
	t.Helper()
	cfg := &Config{}
	fs, common, err := sidecar.NewFlagSet(cfg.Options(args))
	if err != nil {
		t.Fatal(err)
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := common.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return common, nil
}

// Every gate upstream's provisioner registers is accepted, with upstream's defaults; an unknown gate (or another
// sidecar's) fails naming it, as upstream's provisioner fails.
func TestUpstreamArgsAndFeatureGates(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		want    map[featuregate.Feature]bool
	}{
		{name: "upstream's manifest", args: upstreamArgs,
			want: map[featuregate.Feature]bool{Topology: true, VolumeAttributesClass: true, CrossNamespaceVolumeDataSource: false, flags.ReleaseLeaderElectionOnExit: true}},
		{name: "Helm on a cluster without the VAC API", args: append(upstreamArgs[:len(upstreamArgs):len(upstreamArgs)], "--feature-gates=VolumeAttributesClass=false"),
			want: map[featuregate.Feature]bool{Topology: true, VolumeAttributesClass: false}},
		{name: "every upstream gate", args: []string{"--feature-gates=Topology=false,CrossNamespaceVolumeDataSource=true,VolumeAttributesClass=false,ReleaseLeaderElectionOnExit=false,ContextualLogging=true,LoggingAlphaOptions=true"},
			want: map[featuregate.Feature]bool{Topology: false, CrossNamespaceVolumeDataSource: true, VolumeAttributesClass: false, flags.ReleaseLeaderElectionOnExit: false}},
		{name: "unknown gate", args: []string{"--feature-gates=Topology=true,NoSuchGate=true"}, wantErr: "unrecognized feature gate: NoSuchGate"},
		{name: "the attacher's gate", args: []string{"--feature-gates=MutableCSINodeAllocatableCount=true"}, wantErr: "unrecognized feature gate: MutableCSINodeAllocatableCount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			common, err := parseCommon(t, tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parse = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			for gate, want := range tt.want {
				if got := common.FeatureGates.Enabled(gate); got != want {
					t.Errorf("%s = %t, want %t", gate, got, want)
				}
			}
		})
	}
}

// Topology=true (upstream's manifest) is what Stowage does anyway: no warning; Topology=false is ignored, and
// said so.
func TestIgnoredProvisionerGates(t *testing.T) {
	for _, tt := range []struct {
		arg  string
		want []string
	}{
		{arg: "Topology=true,VolumeAttributesClass=false"},
		{arg: "Topology=false,CrossNamespaceVolumeDataSource=true", want: []string{"CrossNamespaceVolumeDataSource=true", "Topology=false"}},
	} {
		common, err := parseCommon(t, "--feature-gates="+tt.arg)
		if err != nil {
			t.Fatal(err)
		}
		got := common.IgnoredGates(Defaults.Gates)
		if len(got) != len(tt.want) {
			t.Errorf("%s: ignored gates %v, want %v", tt.arg, got, tt.want)
		}
		for _, g := range tt.want {
			if got[g] == "" {
				t.Errorf("%s: %s not reported as ignored (got %v)", tt.arg, g, got)
			}
		}
	}
}

// The gate and the API server's discovery decide whether the leader reads VolumeAttributesClasses: without the
// v1 API the gate goes off by itself, as upstream's, whatever ENABLE_VAC_FALLBACK says; with the gate off,
// discovery is not even asked.
func TestReadAttributesClasses(t *testing.T) {
	vacServed := []*metav1.APIResourceList{{GroupVersion: "storage.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "storageclasses"}, {Name: "volumeattributesclasses"}}}}
	vacMissing := []*metav1.APIResourceList{{GroupVersion: "storage.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "storageclasses"}}}}
	tests := []struct {
		name          string
		gates         string
		fallback      string
		resources     []*metav1.APIResourceList
		wantRead      bool
		wantGate      bool
		wantDiscovery bool
		wantErr       string
	}{
		{name: "served", resources: vacServed, wantRead: true, wantGate: true, wantDiscovery: true},
		{name: "not served: off by itself", resources: vacMissing, wantDiscovery: true},
		{name: "not served, ENABLE_VAC_FALLBACK=false: off all the same", fallback: "false", resources: vacMissing, wantDiscovery: true},
		{name: "storage.k8s.io/v1 unknown is not served", wantDiscovery: true},
		{name: "gate off", gates: "VolumeAttributesClass=false", resources: vacServed},
		{name: "ENABLE_VAC_FALLBACK is not read", fallback: "yes please", resources: vacServed, wantRead: true, wantGate: true, wantDiscovery: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("ENABLE_VAC_FALLBACK", tt.fallback)
			var args []string
			if tt.gates != "" {
				args = []string{"--feature-gates=" + tt.gates}
			}
			common, err := parseCommon(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			kube := fake.NewClientset()
			kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = tt.resources
			env := driverEnv(t, []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE},
				csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME)
			env.Flags, env.Clients = common, &kubeclient.Clients{Kube: kube}
			cfg := &Config{}
			d, err := cfg.leaderDeps(env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("leaderDeps = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, ctx := ktesting.NewTestContext(t)
			vac, err := d.readAttributesClasses(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if vac.read != tt.wantRead || vac.gate != tt.wantGate {
				t.Errorf("readAttributesClasses = read %t, gate %t; want %t, %t", vac.read, vac.gate, tt.wantRead, tt.wantGate)
			}
			if asked := len(kube.Actions()) > 0; asked != tt.wantDiscovery {
				t.Errorf("discovery asked = %t (%v), want %t", asked, kube.Actions(), tt.wantDiscovery)
			}
		})
	}
}
