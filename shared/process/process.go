// Package process is the wiring a driver binary's main shares once its flags are parsed: exit codes for a bad
// command line, the logging flags applied, a context that SIGINT and SIGTERM cancel, and logs flushed on exit.
package process

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json for every binary that runs through Main
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/signals"
)

// Exit codes: 2 for a command line the binary cannot run with, 1 for a run that failed.
const (
	ExitFailed = 1
	ExitUsage  = 2
)

// Flags are the flags every driver binary has besides its own: --version and the logging flags.
type Flags struct {
	ShowVersion bool
	Logging     *logsapi.LoggingConfiguration
}

// AddFlags registers the Flags on fs, with the logging defaults, and returns where their values land.
func AddFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{Logging: logsapi.NewLoggingConfiguration()}
	fs.BoolVar(&f.ShowVersion, "version", false, "Show version.")
	logsapi.AddGoFlags(f.Logging, fs)
	return f
}

// UsageError marks an error of the command line found after the flags parsed (a flag that is accepted but not
// supported, say), so Main exits with ExitUsage as for a flag that did not parse.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// ParseFailed reports a command line that did not parse and returns ExitUsage. flag.ErrHelp is not reported: the
// flag set has already printed the usage that was asked for.
func ParseFailed(stderr io.Writer, binary string, err error) int {
	if !errors.Is(err, flag.ErrHelp) {
		_, _ = fmt.Fprintf(stderr, "%s: %v\n", binary, err)
	}
	return ExitUsage
}

// Main applies the logging flags and runs body with a context that carries a logger named for the binary and
// is cancelled by the first SIGINT or SIGTERM (a second one exits at once). It returns the exit code: 0 when
// body returns nil, ExitUsage for invalid logging flags or a UsageError, ExitFailed for another error.
func Main(stderr io.Writer, binary string, logging *logsapi.LoggingConfiguration, body func(ctx context.Context) error) int {
	if err := logsapi.ValidateAndApply(logging, nil); err != nil {
		_, _ = fmt.Fprintf(stderr, "%s: %v\n", binary, err)
		return ExitUsage
	}
	logger := klog.Background().WithName(binary)
	ctx, stop := signals.Context(klog.NewContext(context.Background(), logger), nil)
	defer stop()
	defer klog.Flush()
	start := time.Now()
	err := body(ctx)
	var usage UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		logger.Error(usage.Err, "Invalid command line")
		return ExitUsage
	default:
		logger.Error(err, "Stopped with an error", "binary", binary, "after", time.Since(start).Round(time.Second))
		return ExitFailed
	}
}
