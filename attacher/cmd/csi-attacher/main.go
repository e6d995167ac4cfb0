// Command csi-attacher is Stowage's drop-in replacement for the external-attacher sidecar: it watches
// VolumeAttachments of one CSI driver and calls ControllerPublishVolume/ControllerUnpublishVolume.
package main

import (
	"context"
	"os"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/attacher/internal/app"
	"github.com/stowage-csi/stowage/shared/sidecar"
	"github.com/stowage-csi/stowage/shared/signals"
)

func main() {
	ctx, stop := signals.Context(context.Background(), nil)
	defer stop()
	var cfg app.Config
	err := sidecar.Run(ctx, sidecar.Options{
		Binary:     app.Binary,
		Defaults:   app.Defaults,
		LockPrefix: app.LockPrefix,
		Args:       os.Args[1:],
		AddFlags:   cfg.AddFlags,
		Validate:   cfg.Validate,
		Migration:  true,
	}, func(ctx context.Context, env *sidecar.Env) error {
		return app.Run(ctx, env, cfg)
	})
	if err != nil {
		klog.ErrorS(err, "csi-attacher failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}
