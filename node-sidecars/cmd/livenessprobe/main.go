// Command livenessprobe is Stowage's drop-in replacement for the Kubernetes livenessprobe sidecar: it serves
// /healthz and answers it with the CSI driver's Probe.
package main

import (
	"context"
	"flag"
	"os"

	"github.com/stowage-csi/stowage/node-sidecars/internal/command"
	"github.com/stowage-csi/stowage/node-sidecars/internal/liveness"
)

func main() {
	fs := flag.NewFlagSet(liveness.Binary, flag.ContinueOnError)
	common := command.Register(fs)
	cfg := liveness.AddFlags(fs)
	os.Exit(command.Process{
		Binary:   liveness.Binary,
		Flags:    fs,
		Common:   common,
		Validate: cfg.Validate,
		Run:      func(ctx context.Context) error { return liveness.Run(ctx, *cfg) },
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
	}.Main(os.Args[1:]))
}
