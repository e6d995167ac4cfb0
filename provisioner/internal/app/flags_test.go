package app

import (
	"context"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stowage-csi/stowage/shared/sidecar"
)

// The defaults are upstream's external-provisioner's, except the shared QPS/burst Stowage raises on purpose.
// The flag set is the one sidecar.Run parses for the binary.
func TestFlagDefaultsMatchUpstream(t *testing.T) {
	var cfg Config
	fs, _, err := sidecar.NewFlagSet(cfg.Options(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"volume-name-prefix": "pvc", "volume-name-uuid-length": "-1", "timeout": "10s", "worker-threads": "100",
		"retry-interval-start": "1s", "retry-interval-max": "5m0s", "strict-topology": "false",
		"immediate-topology": "true", "extra-create-metadata": "false", "default-fstype": "",
		"controller-publish-readonly": "false", "prevent-volume-mode-conversion": "true", "enable-capacity": "false",
		"capacity-threads": "1", "capacity-poll-interval": "1m0s", "capacity-for-immediate-binding": "false",
		"capacity-ownerref-level": "1", "kube-api-capacity-qps": "1", "kube-api-capacity-burst": "5",
		"node-deployment": "false", "node-deployment-immediate-binding": "true", "cloning-protection-threads": "1",
		"node-deployment-base-delay": "20s", "node-deployment-max-delay": "1m0s", "enable-pprof": "false",
		"snapshot-orphan-sweep-interval": "5m0s", "csi-address": "/run/csi/socket", "master": "",
		"leader-election": "false", "http-endpoint": "", "metrics-path": "/metrics",
	}
	for name, def := range want {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("flag --%s missing", name)
			continue
		}
		if f.DefValue != def {
			t.Errorf("--%s default %q, want %q", name, f.DefValue, def)
		}
	}
}

// The flags accepted only for compatibility are the ones sidecar.Run warns about when set, and each is a flag
// of the binary (a misspelt name would never warn).
func TestOptionsNameTheFlagsWithoutEffect(t *testing.T) {
	var cfg Config
	o := cfg.Options(nil)
	fs, _, err := sidecar.NewFlagSet(o)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"node-deployment-base-delay", "node-deployment-max-delay", "snapshot-orphan-sweep-interval"}
	if got := slices.Sorted(maps.Keys(o.NoEffect)); !slices.Equal(got, want) {
		t.Errorf("flags without effect %q, want %q", got, want)
	}
	for name, why := range o.NoEffect {
		if fs.Lookup(name) == nil || why == "" {
			t.Errorf("--%s: registered %v, reason %q; want a flag of the binary and a reason", name, fs.Lookup(name) != nil, why)
		}
	}
}

// Invalid flags stop sidecar.Run before it builds a client or dials the driver.
func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--volume-name-prefix="}, "--volume-name-prefix"},
		{[]string{"--cloning-protection-threads=0"}, "--cloning-protection-threads"},
		{[]string{"--enable-capacity", "--capacity-poll-interval=0"}, "--capacity-poll-interval"},
		{[]string{"--timeout=0"}, "--timeout"},
	} {
		var cfg Config
		err := sidecar.Run(context.Background(), cfg.Options(tt.args), func(context.Context, *sidecar.Env) error {
			t.Errorf("%v: the controllers ran", tt.args)
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%v: Run() = %v, want an error naming %s", tt.args, err, tt.wantErr)
		}
	}
}

// TestValidateNeedsTheEnvironmentItsFlagsRead: the variables --node-deployment and --enable-capacity read once
// the replica leads are required at start-up.
func TestValidateNeedsTheEnvironmentItsFlagsRead(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		env     map[string]string
		wantErr string
	}{
		{args: []string{"--node-deployment"}, wantErr: "--node-deployment needs the NODE_NAME environment variable"},
		{args: []string{"--node-deployment"}, env: map[string]string{"NODE_NAME": "node-a"}},
		{args: []string{"--enable-capacity"}, env: map[string]string{"POD_NAME": "p"}, wantErr: "--enable-capacity needs the NAMESPACE environment variable"},
		{args: []string{"--enable-capacity"}, env: map[string]string{"NAMESPACE": "kube-system"}, wantErr: "needs the POD_NAME environment variable"},
		{args: []string{"--enable-capacity", "--capacity-ownerref-level=-1"}, env: map[string]string{"NAMESPACE": "kube-system"}},
		{args: []string{"--enable-capacity"}, env: map[string]string{"NAMESPACE": "kube-system", "POD_NAME": "p"}},
	} {
		for _, name := range []string{"NODE_NAME", "NAMESPACE", "POD_NAME"} {
			t.Setenv(name, tt.env[name])
		}
		var cfg Config
		fs, _, err := sidecar.NewFlagSet(cfg.Options(nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		err = cfg.Validate()
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%v with %v: Validate() = %v, want %q", tt.args, tt.env, err, tt.wantErr)
		}
	}
}

// --master is the provisioner's own flag; Options hands its parsed value to the clients.
func TestOptionsPassMasterAfterParsing(t *testing.T) {
	var cfg Config
	o := cfg.Options(nil)
	fs, _, err := sidecar.NewFlagSet(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--master=https://127.0.0.1:7443"}); err != nil {
		t.Fatal(err)
	}
	if got := o.Master(); got != "https://127.0.0.1:7443" {
		t.Errorf("Options.Master() = %q after parsing --master", got)
	}
	if !o.Migration || o.LockPrefix != "" || o.Binary != "csi-provisioner" || o.Prepare == nil {
		t.Errorf("options %+v: want the migrated label, the driver name as Lease name, and Prepare", o)
	}
}

// Events use upstream's provisioner source, "<driver>_<hostname>", through a client of their own.
func TestOptionsChooseUpstreamEventSource(t *testing.T) {
	var cfg Config
	o := cfg.Options(nil)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	want := "ebs.csi.aws.com_" + strings.ReplaceAll(host, "_", "-")
	if o.EventSource == nil || o.EventSource("ebs.csi.aws.com") != want {
		t.Errorf("Event source is not %q", want)
	}
	if !o.EventsOwnClient {
		t.Error("Events share the main client")
	}
}
