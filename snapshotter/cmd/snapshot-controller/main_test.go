package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stowage-csi/stowage/shared/process"
	"github.com/stowage-csi/stowage/snapshotter/internal/controller/app"
)

func validateOnlyEnv(value string) func(string) string {
	return func(k string) string {
		if k == process.ValidateOnlyEnv {
			return value
		}
		return ""
	}
}

// TestRunValidateOnly: with STOWAGE_VALIDATE_ONLY a command line that parses but that the controller refuses
// exits 1, as upstream's does for a bad flag, and a valid one prints the verdict and exits 0 without starting
// (outside a Pod and without a kubeconfig, a start would fail building its client).
func TestRunValidateOnly(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        string
		wantCode   int
		wantStdout string
	}{
		{name: "valid", env: "1", args: []string{"--leader-election", "--http-endpoint=:8080", "--v=5"},
			wantStdout: "snapshot-controller: configuration valid\n"},
		{name: "version", env: "1", args: []string{"--version"}, wantStdout: "snapshot-controller dev\n"},
		{name: "negative resync", env: "1", args: []string{"--resync-period=-1s"}, wantCode: 1},
		{name: "renew deadline not below the lease duration", env: "1", args: []string{"--leader-election-renew-deadline=1m"}, wantCode: 1},
		{name: "logging format, checked only when the logging is applied", env: "1", args: []string{"--logging-format=xml"}, wantCode: 1},
		{name: "switch that is not a boolean", env: "yes", wantCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout bytes.Buffer
			code := run(tt.args, validateOnlyEnv(tt.env), &stdout)
			if code != tt.wantCode || stdout.String() != tt.wantStdout {
				t.Errorf("exit %d, stdout %q; want %d and %q", code, stdout.String(), tt.wantCode, tt.wantStdout)
			}
		})
	}
}

func TestValidateOnlyNamesTheLoggingSetting(t *testing.T) {
	cfg, err := app.Parse([]string{"--logging-format=xml"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := validateOnly(cfg, validateOnlyEnv("1"), io.Discard); err == nil || !strings.Contains(err.Error(), "format") ||
		!strings.Contains(err.Error(), "xml") {
		t.Fatalf("validateOnly = %v, want an error naming the format xml", err)
	}
}
