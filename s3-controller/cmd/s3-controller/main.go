// Command s3-controller is Stowage's drop-in for the Mountpoint for Amazon S3 CSI driver's
// aws-s3-csi-controller: it runs the Mountpoint Pods that serve workloads' S3 volumes.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"

	"github.com/stowage-csi/stowage/s3-controller/internal/app"
	"github.com/stowage-csi/stowage/s3-controller/internal/config"
	"github.com/stowage-csi/stowage/shared/process"
	"github.com/stowage-csi/stowage/shared/version"
)

const binary = "s3-controller"

func main() {
	code := run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	if code != 0 {
		klog.FlushAndExit(klog.ExitFlushTimeout, code)
	}
	klog.Flush()
}

// printedError is a command line that did not parse: the flag package has printed the error and the usage.
type printedError struct{ error }

// parse reads the command line and environment into a checked configuration. A nil configuration with a nil
// error means there is nothing to run: --help or --version printed what was asked.
func parse(args []string, getenv func(string) string, stdout, stderr io.Writer) (*config.Config, error) {
	fs := flag.NewFlagSet(binary, flag.ContinueOnError)
	fs.SetOutput(stderr)
	klog.InitFlags(fs)
	cfg := config.Register(fs, getenv)
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil
		}
		return nil, printedError{err}
	}
	if *showVersion {
		return nil, version.Print(stdout, binary)
	}
	logger := klog.Background()
	if err := cfg.Parse(func(msg string, kv ...any) { logger.Info(msg, kv...) }); err != nil {
		return nil, err
	}
	return cfg, nil
}

// run returns the exit code: 2 for a command line or environment it cannot run with (flag's own exit code),
// 1 for a run that failed.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parse(args, getenv, stdout, stderr)
	if err != nil {
		if !errors.As(err, new(printedError)) {
			_, _ = fmt.Fprintf(stderr, "%s: invalid flags: %v\n", binary, err)
		}
		return process.ExitUsage
	}
	if cfg == nil {
		return 0
	}
	// The flags and environment have passed every check that needs no API server.
	done, err := process.EndIfValidateOnly(getenv, stdout, binary)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "%s: %v\n", binary, err)
		return process.ExitUsage
	}
	if done {
		return 0
	}
	logger := klog.Background()
	ctx := klog.NewContext(signals.SetupSignalHandler(), logger)
	if err := app.Run(ctx, cfg); err != nil {
		logger.Error(err, "s3-controller failed")
		return process.ExitFailed
	}
	return 0
}
