// Command csi-provisioner is Stowage's drop-in replacement for the external-provisioner sidecar.
package main

import (
	"context"
	"os"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/provisioner/internal/app"
	"github.com/stowage-csi/stowage/shared/sidecar"
	"github.com/stowage-csi/stowage/shared/signals"
)

func main() {
	// The first SIGINT/SIGTERM drains and releases the Lease; a second one exits at once.
	ctx, stop := signals.Context(context.Background(), nil)
	defer stop()
	var cfg app.Config
	err := sidecar.Run(ctx, cfg.Options(os.Args[1:]), func(ctx context.Context, env *sidecar.Env) error {
		return app.Run(ctx, env, &cfg)
	})
	if err != nil {
		klog.ErrorS(err, "csi-provisioner failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}
