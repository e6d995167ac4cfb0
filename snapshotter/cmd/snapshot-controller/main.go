// Command snapshot-controller is Stowage's drop-in replacement for upstream's snapshot-controller
// (external-snapshotter): it binds VolumeSnapshots to VolumeSnapshotContents cluster-wide, for every driver.
package main

import (
	"context"
	"io"
	"os"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/process"
	"github.com/stowage-csi/stowage/shared/signals"
	"github.com/stowage-csi/stowage/snapshotter/internal/controller/app"
)

func main() {
	code := run(os.Args[1:], os.Getenv, os.Stdout)
	if code != 0 {
		klog.FlushAndExit(klog.ExitFlushTimeout, code)
	}
	klog.Flush()
}

// run returns the exit code: 1 for a command line it cannot run with, as upstream's, and for a failed run.
func run(args []string, getenv func(string) string, stdout io.Writer) int {
	cfg, err := app.Parse(args, stdout)
	if err != nil {
		klog.ErrorS(err, "Invalid command line")
		return 1
	}
	if cfg == nil {
		return 0
	}
	// A validate-only run checks the logging flags app.Run would apply, and ends before the API server.
	if done, err := validateOnly(cfg, getenv, stdout); err != nil || done {
		if err != nil {
			klog.ErrorS(err, "Invalid command line")
			return 1
		}
		return 0
	}
	ctx, stop := signals.Context(context.Background(), nil)
	err = app.Run(ctx, cfg)
	stop()
	if err != nil {
		klog.ErrorS(err, "snapshot-controller failed")
		return 1
	}
	return 0
}

// validateOnly reports done after the verdict of a validate-only run (process.ValidateOnlyEnv), or an error
// naming what would stop the controller at start-up.
func validateOnly(cfg *app.Config, getenv func(string) string, stdout io.Writer) (bool, error) {
	if v := getenv(process.ValidateOnlyEnv); v == "" {
		return false, nil
	}
	if err := process.CheckLogging(cfg.Logging, cfg.FeatureGates); err != nil {
		return false, err
	}
	return process.EndIfValidateOnly(getenv, stdout, app.Binary)
}
