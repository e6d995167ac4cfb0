// Command csi-resizer is Stowage's drop-in replacement for the external-resizer sidecar: it watches
// PersistentVolumeClaims of one CSI driver and calls ControllerExpandVolume and ControllerModifyVolume.
package main

import (
	"context"
	"os"

	"github.com/stowage-csi/stowage/resizer/internal/app"
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
		Master:     func() string { return cfg.Master },
		Prepare:    app.Prepare,
		// Upstream's resizer names its Events' source "external-resizer <driver>".
		EventSource: app.EventSource,
	}, func(ctx context.Context, env *sidecar.Env) error {
		return app.Run(ctx, env, cfg)
	})
}
