package app

import (
	"flag"
	"testing"
)

// The defaults are upstream's (reference/sidecars.md §2), except the shared QPS/burst Stowage raises on purpose.
func TestFlagDefaultsMatchUpstream(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	if _, err := RegisterFlags(fs); err != nil {
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

func TestValidate(t *testing.T) {
	for _, args := range [][]string{
		{"--volume-name-prefix="},
		{"--cloning-protection-threads=0"},
		{"--enable-capacity", "--capacity-poll-interval=0"},
		{"--timeout=0"},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		cfg, err := RegisterFlags(fs)
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := cfg.validate(); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
