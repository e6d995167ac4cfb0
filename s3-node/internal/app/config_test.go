package app

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	base := Config{NodeID: "node-a", Endpoint: "unix://tmp/csi.sock", UnmountInterval: 2 * time.Minute}
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{name: "upstream's defaults", mutate: func(*Config) {}},
		{name: "tcp endpoint", mutate: func(c *Config) { c.Endpoint = "tcp://127.0.0.1:10000" }},
		{name: "no node name", mutate: func(c *Config) { c.NodeID = "" }, wantErr: "--node-id (or CSI_NODE_NAME) is required"},
		{name: "endpoint without a scheme", mutate: func(c *Config) { c.Endpoint = "/csi/csi.sock" }, wantErr: "--endpoint"},
		{name: "unix endpoint without a path", mutate: func(c *Config) { c.Endpoint = "unix://" }, wantErr: "--endpoint"},
		{name: "zero sweep interval", mutate: func(c *Config) { c.UnmountInterval = 0 }, wantErr: "--unmount-sweep-interval"},
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
