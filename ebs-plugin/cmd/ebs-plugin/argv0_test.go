package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// upstreamName is the path upstream's node DaemonSet runs its preStop hook at: /bin/aws-ebs-csi-driver.
const upstreamName = "aws-ebs-csi-driver"

// TestMain lets the test binary stand in for the command: started under upstream's name (through a symlink,
// as the image installs it) it runs main instead of the tests, so the tests below exercise the real
// os.Args handling.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == upstreamName {
		main()
	}
	os.Exit(m.Run())
}

// runAs runs this test binary as upstream's /bin/aws-ebs-csi-driver with args, and returns its exit code and
// its stdout and stderr together.
func runAs(t *testing.T, env []string, args ...string) (exitCode int, output string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), upstreamName)
	if err := os.Symlink(self, link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(link, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String()
}

func TestUnderUpstreamsNameThePreStopHookRunsPositionally(t *testing.T) {
	// Upstream's preStop command is exactly ["/bin/aws-ebs-csi-driver", "pre-stop-hook"]; a kubeconfig that
	// does not exist makes the hook fail at its first step, which shows the mode was taken.
	missing := filepath.Join(t.TempDir(), "missing-kubeconfig")
	code, stderr := runAs(t, []string{"CSI_NODE_NAME=node-1"}, "pre-stop-hook", "--kubeconfig="+missing)
	if code != 1 || !strings.Contains(stderr, "missing-kubeconfig") {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 from the hook naming the kubeconfig", code, stderr)
	}
}

func TestUnderUpstreamsNameModesAndFlagsParse(t *testing.T) {
	tests := []struct {
		args     []string
		wantCode int
		want     string
	}{
		{args: []string{"--version"}, want: "ebs-plugin"},
		{args: []string{"node", "--version"}, want: "ebs-plugin"},
		{args: []string{"controller", "--version"}, want: "ebs-plugin"},
		{args: []string{"all", "--version"}, want: "ebs-plugin"},
		{args: []string{"no-such-mode"}, wantCode: 2, want: "unknown mode"},
		{args: []string{"node", "--no-such-flag"}, wantCode: 2, want: "no-such-flag"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, output := runAs(t, nil, tc.args...)
			if code != tc.wantCode || !strings.Contains(output, tc.want) {
				t.Fatalf("exit %d, output:\n%s\nwant exit %d and %q", code, output, tc.wantCode, tc.want)
			}
		})
	}
}

// TestValidateOnly runs the binary with STOWAGE_VALIDATE_ONLY=1 in each mode: a configuration that parses but
// that the mode refuses exits 2 naming the setting, a valid one prints the verdict and exits 0 without serving
// (no endpoint is bound: each run names a socket in a folder that does not exist).
func TestValidateOnly(t *testing.T) {
	sock := "--endpoint=unix://" + filepath.Join(t.TempDir(), "missing", "csi.sock")
	tests := []struct {
		args     []string
		env      []string
		wantCode int
		want     string
	}{
		{args: []string{"controller", sock, "--extra-tags=team=storage", "--http-endpoint=0.0.0.0:3301"}, want: "ebs-plugin: configuration valid"},
		{args: []string{"node", sock, "--metadata-sources=kubernetes"}, want: "ebs-plugin: configuration valid"},
		{args: []string{"all", sock}, want: "ebs-plugin: configuration valid"},
		{args: []string{"controller", sock, "--extra-tags=no-equals-sign"}, wantCode: 2, want: "--extra-tags"},
		{args: []string{"node", sock, "--metadata-sources=imds,ec2"}, wantCode: 2, want: "--metadata-sources"},
		{args: []string{"node", "--endpoint=/csi/csi.sock"}, wantCode: 2, want: "--endpoint"},
		{args: []string{"node", sock, "--volume-attach-limit=10", "--reserved-volume-attachments=2"}, wantCode: 2, want: "mutually exclusive"},
		{args: []string{"controller", sock, "--modify-volume-request-handler-timeout=0s"}, wantCode: 2, want: "--modify-volume-request-handler-timeout"},
		{args: []string{"node", sock, "--windows-host-process"}, wantCode: 2, want: "--windows-host-process"},
		{args: []string{"metadatalabeler"}, wantCode: 2, want: "unknown mode"},
		{args: []string{"pre-stop-hook"}, env: []string{"CSI_NODE_NAME=node-1"}, want: "ebs-plugin: configuration valid"},
		{args: []string{"pre-stop-hook"}, wantCode: 2, want: "CSI_NODE_NAME"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, output := runAs(t, append([]string{"STOWAGE_VALIDATE_ONLY=1"}, tc.env...), tc.args...)
			if code != tc.wantCode || !strings.Contains(output, tc.want) {
				t.Fatalf("exit %d, output:\n%s\nwant exit %d and %q", code, output, tc.wantCode, tc.want)
			}
			if tc.wantCode != 0 && strings.Contains(output, "configuration valid") {
				t.Errorf("an invalid configuration was called valid:\n%s", output)
			}
		})
	}
}
