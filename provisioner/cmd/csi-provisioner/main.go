// Command csi-provisioner is Stowage's drop-in replacement for the external-provisioner sidecar.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/provisioner/internal/app"
	"github.com/stowage-csi/stowage/shared/signals"
	"github.com/stowage-csi/stowage/shared/version"
)

func main() {
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	cfg, err := app.RegisterFlags(fs)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = fs.Parse(os.Args[1:])
	if cfg.Common.ShowVersion {
		fmt.Println(os.Args[0], version.Version)
		return
	}
	// The first SIGINT/SIGTERM drains and releases the Lease; a second one exits at once.
	ctx, stop := signals.Context(context.Background(), nil)
	defer stop()
	if err := app.Run(ctx, cfg); err != nil {
		klog.ErrorS(err, "csi-provisioner failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}
