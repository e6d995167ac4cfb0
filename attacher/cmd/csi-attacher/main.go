// Command csi-attacher is Stowage's drop-in replacement for the external-attacher sidecar: it watches
// VolumeAttachments of one CSI driver and calls ControllerPublishVolume/ControllerUnpublishVolume.
package main

import (
	"context"
	"os"

	"github.com/stowage-csi/stowage/attacher/internal/app"
	"github.com/stowage-csi/stowage/shared/sidecar"
)

func main() {
	var cfg app.Config
	sidecar.Main(sidecar.Options{
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
}
