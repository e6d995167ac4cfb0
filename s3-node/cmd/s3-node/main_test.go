package main

import (
	"bytes"
	"testing"
	"time"

	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/stowage-csi/stowage/shared/process"
	"github.com/stowage-csi/stowage/shared/testutil"
)

func TestParseArgsUpstreamFlagsAndEnv(t *testing.T) {
	env := map[string]string{"CSI_NODE_NAME": "node-a", "MOUNTPOINT_VERSION": "1.23.0", "MOUNTPOINT_NAMESPACE": "mp", "CONTAINER_KUBELET_PATH": "/k"}
	o, err := parseArgs([]string{"--endpoint=unix:/var/lib/kubelet/plugins/s3.csi.aws.com/csi.sock", "--v=4"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	if c.NodeID != "node-a" || c.MountpointVersion != "1.23.0" || c.Namespace != "mp" || c.KubeletPath != "/k" ||
		c.Endpoint != "unix:/var/lib/kubelet/plugins/s3.csi.aws.com/csi.sock" || c.UnmountInterval != 2*time.Minute {
		t.Fatalf("config %+v", c)
	}
	o, err = parseArgs([]string{"--node-id=x"}, func(string) string { return "" })
	if err != nil || o.cfg.Namespace != "mount-s3" || o.cfg.KubeletPath != "/var/lib/kubelet" || o.cfg.Endpoint != "unix://tmp/csi.sock" {
		t.Fatalf("defaults %+v, %v", o.cfg, err)
	}
}

// TestRunValidateOnly: with STOWAGE_VALIDATE_ONLY a configuration that parses but would not start exits 2
// (app's TestConfigValidate checks each error names its setting), and a valid one prints the verdict and exits
// 0 without starting: no kubeconfig is given outside a Pod, so a start would fail building its client.
func TestRunValidateOnly(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		wantCode int
	}{
		{name: "valid", args: []string{"--endpoint=unix:/csi/csi.sock", "--v=4"}, env: map[string]string{"CSI_NODE_NAME": "node-a"}},
		{name: "no node name", args: []string{"--endpoint=unix:/csi/csi.sock"}, wantCode: process.ExitUsage},
		{name: "endpoint without a scheme", args: []string{"--endpoint=/csi/csi.sock", "--node-id=node-a"}, wantCode: process.ExitUsage},
		{name: "zero sweep interval", args: []string{"--node-id=node-a", "--unmount-sweep-interval=0s"}, wantCode: process.ExitUsage},
		{name: "switch that is not a boolean", args: []string{"--node-id=node-a"}, env: map[string]string{process.ValidateOnlyEnv: "yes"},
			wantCode: process.ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Cleanup(func() {
				if err := logsapi.ResetForTest(nil); err != nil {
					t.Errorf("resetting logging: %v", err)
				}
			})
			var stdout, stderr bytes.Buffer
			code := run(tt.args, testutil.ValidateOnlyGetenv(tt.env), &stdout, &stderr)
			want := ""
			if tt.wantCode == 0 {
				want = "s3-node: configuration valid\n"
			}
			if code != tt.wantCode || stdout.String() != want {
				t.Errorf("exit %d, stdout %q; want %d and %q (stderr %q)", code, stdout.String(), tt.wantCode, want, stderr.String())
			}
		})
	}
}
