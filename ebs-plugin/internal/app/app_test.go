package app

import (
	"strings"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/driver"
)

func TestConfigValidate(t *testing.T) {
	base := Config{Mode: driver.ModeAll, Endpoint: "unix://tmp/csi.sock", MetadataSources: []string{"imds,kubernetes"},
		VolumeAttachLimit: -1, ReservedVolumeAttachments: -1, ModifyVolumeWindow: 2 * time.Second}
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{name: "defaults", mutate: func(*Config) {}},
		{name: "pre-stop-hook", mutate: func(c *Config) { c.Mode, c.NodeName = ModePreStopHook, "node-1" }},
		{name: "pre-stop-hook without a node name", mutate: func(c *Config) { c.Mode = ModePreStopHook }, wantErr: "CSI_NODE_NAME"},
		{name: "metadataLabeler", mutate: func(c *Config) { c.Mode = ModeMetadataLabeler }},
		{name: "unknown mode", mutate: func(c *Config) { c.Mode = "metadatalabeler" }, wantErr: "unknown mode"},
		{name: "limit and reserved together", mutate: func(c *Config) { c.VolumeAttachLimit, c.ReservedVolumeAttachments = 10, 2 }, wantErr: "mutually exclusive"},
		{name: "cert without key", mutate: func(c *Config) { c.MetricsCertFile = "/c" }, wantErr: "metrics-key-file"},
		{name: "zero window", mutate: func(c *Config) { c.ModifyVolumeWindow = 0 }, wantErr: "modify-volume-request-handler-timeout"},
		{name: "endpoint without a scheme", mutate: func(c *Config) { c.Endpoint = "/csi/csi.sock" }, wantErr: "--endpoint"},
		{name: "unknown metadata source", mutate: func(c *Config) { c.MetadataSources = []string{"imds,ec2"} }, wantErr: "--metadata-sources"},
		{name: "unknown metadata source, not read in controller mode", mutate: func(c *Config) {
			c.Mode, c.MetadataSources = driver.ModeController, []string{"ec2"}
		}},
		{name: "invalid extra tag", mutate: func(c *Config) { c.ExtraTags = []string{"no-equals-sign"} }, wantErr: "--extra-tags"},
		{name: "invalid extra tag, warned about", mutate: func(c *Config) { c.ExtraTags, c.WarnOnInvalidTag = []string{"no-equals-sign"}, true }},
		{name: "invalid extra tag, not read in node mode", mutate: func(c *Config) { c.Mode, c.ExtraTags = driver.ModeNode, []string{"no-equals-sign"} }},
		{name: "pre-stop-hook reads no endpoint", mutate: func(c *Config) { c.Mode, c.NodeName, c.Endpoint = ModePreStopHook, "node-1", "" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.mutate(&c)
			err := c.Validate()
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestSanitizeAppID(t *testing.T) {
	if got := sanitizeAppID("ebs-csi-driver/stowage-v1.2 (extra)"); got != "ebs-csi-driver/stowage-v1.2extra" {
		t.Fatalf("got %q", got)
	}
	if got := sanitizeAppID(strings.Repeat("a", 80)); len(got) != 50 {
		t.Fatalf("length %d", len(got))
	}
}
