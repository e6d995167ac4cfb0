package sidecar

import (
	"context"
	"strings"
	"testing"

	"github.com/stowage-csi/stowage/shared/process"
)

// TestRunValidateOnly: with STOWAGE_VALIDATE_ONLY a command line that parses but would not start fails naming
// the setting, and a valid one ends with the verdict before anything is dialled. No --kubeconfig is given and
// the test runs outside a Pod, so a run that went on to build its clients would fail there.
func TestRunValidateOnly(t *testing.T) {
	tests := []struct {
		name    string
		env     string
		args    []string
		wantErr string
	}{
		{name: "valid", env: "1", args: []string{"--csi-address=/no/such/csi.sock", "--leader-election", "--timeout=30s"}},
		{name: "valid, true spelt out", env: "true", args: []string{"--http-endpoint=:8080", "--sidecar-flag=good"}},
		{name: "renew deadline not below the lease duration", env: "1", args: []string{"--leader-election-renew-deadline=20s"},
			wantErr: "--leader-election-renew-deadline"},
		{name: "retry interval start above max", env: "1", args: []string{"--retry-interval-start=10m"}, wantErr: "--retry-interval-start"},
		{name: "sidecar's own check", env: "1", args: []string{"--sidecar-flag=bad"}, wantErr: "--sidecar-flag"},
		{name: "logging format", env: "1", args: []string{"--logging-format=xml"}, wantErr: "xml"},
		{name: "switch that is not a boolean", env: "yes", args: []string{"--timeout=30s"}, wantErr: process.ValidateOnlyEnv},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resetLogging(t)
			t.Setenv(process.ValidateOnlyEnv, tt.env)
			o, out, run := ownFlagOptions(t, tt.args...)
			err := Run(context.Background(), o, run)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if out.String() != "csi-test: configuration valid\n" {
					t.Errorf("stdout %q, want the verdict", out.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Run() = %v, want an error naming %q", err, tt.wantErr)
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q, want nothing for an invalid configuration", out.String())
			}
		})
	}
}
