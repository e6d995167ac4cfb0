package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stowage-csi/stowage/shared/process"
	"github.com/stowage-csi/stowage/shared/testutil"
)

// TestRunValidateOnly: with STOWAGE_VALIDATE_ONLY a configuration that parses but that the controller refuses
// exits 2 naming the setting, and a valid one prints the verdict and exits 0 without starting (outside a Pod and
// without a kubeconfig, a start would fail building its client). --version keeps printing the version.
func TestRunValidateOnly(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "valid", args: []string{"--mountpoint-namespace=mount-s3"}, env: map[string]string{"MOUNTPOINT_IMAGE": "mp:1"},
			wantStdout: "s3-controller: configuration valid\n"},
		{name: "version", args: []string{"--version"}, wantStdout: "s3-controller dev\n"},
		{name: "pull policy from the environment", env: map[string]string{"MOUNTPOINT_IMAGE_PULL_POLICY": "Sometimes"},
			wantCode: process.ExitUsage, wantStderr: "--mountpoint-image-pull-policy"},
		{name: "labels that are not JSON", args: []string{"--mountpoint-pod-labels={"}, wantCode: process.ExitUsage, wantStderr: "--mountpoint-pod-labels"},
		{name: "empty namespace", args: []string{"--mountpoint-namespace="}, wantCode: process.ExitUsage, wantStderr: "--mountpoint-namespace"},
		{name: "unknown flag", args: []string{"--no-such-flag"}, wantCode: process.ExitUsage, wantStderr: "no-such-flag"},
		{name: "switch that is not a boolean", env: map[string]string{process.ValidateOnlyEnv: "yes"}, wantCode: process.ExitUsage,
			wantStderr: process.ValidateOnlyEnv},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, testutil.ValidateOnlyGetenv(tt.env), &stdout, &stderr)
			if code != tt.wantCode || stdout.String() != tt.wantStdout || !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q and %q", code, stdout.String(), stderr.String(),
					tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}
