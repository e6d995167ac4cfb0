package process

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
)

// resetLogging lets the next test apply logging flags again: Main applies them once per process, as a binary does.
func resetLogging(t *testing.T) {
	t.Cleanup(func() {
		if err := logsapi.ResetForTest(nil); err != nil {
			t.Errorf("resetting logging: %v", err)
		}
	})
}

func TestMainTurnsTheBodysOutcomeIntoTheExitCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"success", nil, 0},
		{"failure", errors.New("cloud unreachable"), ExitFailed},
		{"unsupported flag", UsageError{Err: errors.New("--windows-host-process is not supported")}, ExitUsage},
		{"wrapped unsupported flag", errors.Join(errors.New("start"), UsageError{Err: errors.New("bad")}), ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resetLogging(t)
			var stderr bytes.Buffer
			var named bool
			code := Main(&stderr, "testbin", logsapi.NewLoggingConfiguration(), func(ctx context.Context) error {
				// The body's context carries the binary's logger and is live until the body returns.
				named = klog.FromContext(ctx).GetSink() != nil && ctx.Err() == nil
				return tc.err
			})
			if code != tc.want {
				t.Errorf("exit code %d, want %d", code, tc.want)
			}
			if !named {
				t.Error("the body ran without a logger in a live context")
			}
		})
	}
}

func TestMainRefusesInvalidLoggingFlagsBeforeTheBodyRuns(t *testing.T) {
	resetLogging(t)
	logging := logsapi.NewLoggingConfiguration()
	logging.Format = "no-such-format"
	var stderr bytes.Buffer
	ran := false
	code := Main(&stderr, "testbin", logging, func(context.Context) error { ran = true; return nil })
	if code != ExitUsage || ran {
		t.Errorf("exit code %d, body ran %v; want %d and not run", code, ran, ExitUsage)
	}
	if !strings.HasPrefix(stderr.String(), "testbin: ") || !strings.Contains(stderr.String(), "no-such-format") {
		t.Errorf("stderr %q does not name the binary and the bad format", stderr.String())
	}
}

func TestParseFailedReportsAllButAHelpRequest(t *testing.T) {
	var stderr bytes.Buffer
	if code := ParseFailed(&stderr, "testbin", flag.ErrHelp); code != ExitUsage || stderr.Len() != 0 {
		t.Errorf("for -help: exit code %d, stderr %q; want %d and nothing", code, stderr.String(), ExitUsage)
	}
	if code := ParseFailed(&stderr, "testbin", errors.New("flag provided but not defined: -x")); code != ExitUsage ||
		stderr.String() != "testbin: flag provided but not defined: -x\n" {
		t.Errorf("for a bad flag: exit code %d, stderr %q", code, stderr.String())
	}
}

func TestAddFlagsRegistersVersionAndLogging(t *testing.T) {
	fs := flag.NewFlagSet("testbin", flag.ContinueOnError)
	f := AddFlags(fs)
	if err := fs.Parse([]string{"--version", "--v=4", "--logging-format=json"}); err != nil {
		t.Fatal(err)
	}
	if !f.ShowVersion || f.Logging.Verbosity != 4 || f.Logging.Format != "json" {
		t.Errorf("parsed version %v, verbosity %d, format %q; want true, 4, json", f.ShowVersion, f.Logging.Verbosity, f.Logging.Format)
	}
}
