package command

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/stowage-csi/stowage/shared/process"
)

func TestMainExitStatus(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		validate   error
		run        error
		wantCode   int
		wantRun    bool
		wantStdout string
		wantStderr string
	}{
		{name: "logging flags of upstream's manifests", args: []string{"--v=2", "--logging-format=text", "--own=x"}, wantCode: ExitOK, wantRun: true},
		{name: "version", args: []string{"--version"}, wantCode: ExitOK, wantStdout: "test-binary dev\n"},
		// Same logging flags as above: component-base applies a logging configuration once per process.
		{name: "run fails", args: []string{"-v=2", "--logging-format=text"}, run: errors.New("driver went away"), wantCode: ExitFailure, wantRun: true},
		{name: "unknown flag", args: []string{"--leader-election"}, wantCode: ExitUsage, wantStderr: "flag provided but not defined: -leader-election"},
		{name: "positional argument, ignored as upstream ignores it", args: []string{"registration", "--version"}, wantCode: ExitOK, wantStdout: "test-binary dev\n"},
		{name: "invalid flags", validate: errors.New("--own is wrong"), wantCode: ExitUsage, wantStderr: "invalid flags: --own is wrong"},
		{name: "unknown logging format", args: []string{"--logging-format=xml"}, wantCode: ExitUsage, wantStderr: "logging"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test-binary", flag.ContinueOnError)
			common := process.AddFlags(fs)
			fs.String("own", "", "a binary's own flag")
			var stdout, stderr bytes.Buffer
			ran := false
			code := Process{
				Binary:   "test-binary",
				Flags:    fs,
				Common:   common,
				Validate: func() error { return tt.validate },
				Run: func(ctx context.Context) error {
					ran = true
					if ctx.Err() != nil {
						t.Error("Run got a context that already ended")
					}
					return tt.run
				},
				Stdout: &stdout,
				Stderr: &stderr,
			}.Main(tt.args)
			if code != tt.wantCode {
				t.Errorf("exit status %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if ran != tt.wantRun {
				t.Errorf("Run called: %t, want %t", ran, tt.wantRun)
			}
			if stdout.String() != tt.wantStdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

// testConfig is a node sidecar's own configuration, as registrar.Config and liveness.Config are.
type testConfig struct {
	own string
}

func (c *testConfig) Validate() error {
	if c.own == "" {
		return errors.New("--own is required")
	}
	return nil
}

// TestNewRunsWithParsedConfig: the Process New builds parses the binary's own flags into its configuration,
// refuses it when Validate does, and otherwise runs with the parsed value.
func TestNewRunsWithParsedConfig(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantOwn    string
		wantStderr string
	}{
		// The logging flags of TestMainExitStatus: component-base applies one logging configuration per process.
		{name: "parsed", args: []string{"--v=2", "--logging-format=text", "--own=x"}, wantCode: ExitOK, wantOwn: "x"},
		{name: "invalid", args: []string{"--v=2"}, wantCode: ExitUsage, wantStderr: "test-binary: invalid flags: --own is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addFlags := func(fs *flag.FlagSet) *testConfig {
				c := &testConfig{}
				fs.StringVar(&c.own, "own", "", "a binary's own flag")
				return c
			}
			var got *testConfig
			p := New("test-binary", addFlags, func(_ context.Context, c testConfig) error {
				got = &c
				return nil
			})
			var stdout, stderr bytes.Buffer
			p.Stdout, p.Stderr = &stdout, &stderr
			if code := p.Main(tt.args); code != tt.wantCode {
				t.Fatalf("exit status %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if tt.wantOwn == "" {
				if got != nil {
					t.Errorf("run called with %+v, want no run", *got)
				}
			} else if got == nil || got.own != tt.wantOwn {
				t.Errorf("run called with %v, want own %q", got, tt.wantOwn)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

// TestMainValidateOnly: with process.ValidateOnlyEnv set, a command line that parses but that the binary
// refuses fails naming the flag, and a valid one prints the verdict and exits 0 without running.
func TestMainValidateOnly(t *testing.T) {
	tests := []struct {
		name       string
		env        string
		args       []string
		validate   error
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		// The logging flags of TestMainExitStatus: component-base applies one logging configuration per process.
		{name: "valid", env: "1", args: []string{"--v=2", "--logging-format=text", "--own=x"}, wantCode: ExitOK,
			wantStdout: "test-binary: configuration valid\n"},
		{name: "invalid flags", env: "1", args: []string{"--v=2"}, validate: errors.New("--own is required"), wantCode: ExitUsage,
			wantStderr: "invalid flags: --own is required"},
		{name: "invalid logging", env: "1", args: []string{"--logging-format=xml"}, wantCode: ExitUsage, wantStderr: "logging"},
		{name: "switch that is not a boolean", env: "on", args: []string{"--v=2", "--logging-format=text"}, wantCode: ExitUsage,
			wantStderr: process.ValidateOnlyEnv},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test-binary", flag.ContinueOnError)
			common := process.AddFlags(fs)
			fs.String("own", "", "a binary's own flag")
			var stdout, stderr bytes.Buffer
			code := Process{
				Binary:   "test-binary",
				Flags:    fs,
				Common:   common,
				Validate: func() error { return tt.validate },
				Run: func(context.Context) error {
					t.Error("Run called in a validate-only run")
					return nil
				},
				Stdout: &stdout,
				Stderr: &stderr,
				Getenv: func(name string) string {
					if name == process.ValidateOnlyEnv {
						return tt.env
					}
					return ""
				},
			}.Main(tt.args)
			if code != tt.wantCode {
				t.Errorf("exit status %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if stdout.String() != tt.wantStdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}
