// Package command runs a node sidecar (csi-node-driver-registrar, livenessprobe) as a process: the flags both
// share with their upstream binaries (--version and component-base's logging flags), logging set-up, SIGTERM
// as a graceful stop, and the exit status. The controller sidecars start from shared/sidecar instead; these two
// talk to no API server, hold no lease and register none of the standard sidecar flags upstream's do not have.
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	// Registers --logging-format=json, which upstream's node sidecars accept too.
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/flags"
	"github.com/stowage-csi/stowage/shared/process"
	"github.com/stowage-csi/stowage/shared/signals"
	"github.com/stowage-csi/stowage/shared/version"
)

// Exit statuses: 2 for a command line that does not parse (what Go's flag package exits with), 1 for a failure.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// Process is one run of a node sidecar's binary.
type Process struct {
	Binary string
	// Flags is the binary's flag set, with process.Flags and its own registered.
	Flags  *flag.FlagSet
	Common *process.Flags
	// Validate checks the binary's own flags once parsed; each error names the flag at fault.
	Validate func() error
	// Run is the binary's work; it returns nil after a graceful stop.
	Run    func(ctx context.Context) error
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment, for process.ValidateOnlyEnv; nil means os.Getenv.
	Getenv func(string) string
}

// Config is a node sidecar's own configuration: its flags, once parsed, and their check.
type Config[C any] interface {
	*C
	Validate() error
}

// New is the Process of the node sidecar binary: its flag set with process.Flags and those addFlags registers
// into its configuration, that configuration's Validate, and run called with it once parsed; output goes to
// the process's stdout and stderr.
func New[C any, P Config[C]](binary string, addFlags func(*flag.FlagSet) P, run func(context.Context, C) error) Process {
	fs := flag.NewFlagSet(binary, flag.ContinueOnError)
	common := process.AddFlags(fs)
	cfg := addFlags(fs)
	return Process{
		Binary:   binary,
		Flags:    fs,
		Common:   common,
		Validate: cfg.Validate,
		Run:      func(ctx context.Context) error { return run(ctx, *cfg) },
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
		Getenv:   os.Getenv,
	}
}

// Main parses args, sets up logging and runs p.Run until it returns or SIGTERM stops it, and returns the exit
// status. With process.ValidateOnlyEnv set it stops once the flags and logging are checked, before Run.
func (p Process) Main(args []string) int {
	p.Flags.SetOutput(p.Stderr)
	if err := flags.ParseInterspersed(p.Flags, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		// The flag package already printed the error and the usage.
		return ExitUsage
	}
	if p.Common.ShowVersion {
		if err := version.Print(p.Stdout, p.Binary); err != nil {
			return ExitFailure
		}
		return ExitOK
	}
	if err := p.Validate(); err != nil {
		fmt.Fprintf(p.Stderr, "%s: invalid flags: %v\n", p.Binary, err)
		return ExitUsage
	}
	// Upstream's node sidecars have no --feature-gates; the logging gates keep their defaults.
	gates := featuregate.NewFeatureGate()
	if err := logsapi.AddFeatureGates(gates); err != nil {
		fmt.Fprintf(p.Stderr, "%s: %v\n", p.Binary, err)
		return ExitFailure
	}
	if err := logsapi.ValidateAndApply(p.Common.Logging, gates); err != nil {
		fmt.Fprintf(p.Stderr, "%s: setting up logging: %v\n", p.Binary, err)
		return ExitUsage
	}
	logger := klog.Background().WithName(p.Binary)
	flags.WarnPositional(logger, p.Flags.Args())
	// Flags and logging have passed every check that needs no driver socket: a validate-only run ends here.
	getenv := p.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	done, err := process.EndIfValidateOnly(getenv, p.Stdout, p.Binary)
	if err != nil {
		fmt.Fprintf(p.Stderr, "%s: %v\n", p.Binary, err)
		return ExitUsage
	}
	if done {
		return ExitOK
	}
	ctx, stop := signals.Context(klog.NewContext(context.Background(), logger), nil)
	err = p.Run(ctx)
	stop()
	if err != nil {
		logger.Error(err, "Stopped on error")
		klog.Flush()
		return ExitFailure
	}
	klog.Flush()
	return ExitOK
}
