package command

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
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
			common := Register(fs)
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
