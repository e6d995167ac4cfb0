// Command csi-node-driver-registrar is Stowage's drop-in replacement for the Kubernetes node-driver-registrar
// sidecar: it registers a CSI driver's node socket with the kubelet through the plugin registration socket.
package main

import (
	"context"
	"flag"
	"os"

	"github.com/stowage-csi/stowage/node-sidecars/internal/command"
	"github.com/stowage-csi/stowage/node-sidecars/internal/registrar"
)

func main() {
	fs := flag.NewFlagSet(registrar.Binary, flag.ContinueOnError)
	common := command.Register(fs)
	cfg := registrar.AddFlags(fs)
	os.Exit(command.Process{
		Binary:   registrar.Binary,
		Flags:    fs,
		Common:   common,
		Validate: cfg.Validate,
		Run:      func(ctx context.Context) error { return registrar.Run(ctx, *cfg) },
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
	}.Main(os.Args[1:]))
}
