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
		{args: []string{"no-such-mode"}, wantCode: 1, want: "unknown mode"},
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
