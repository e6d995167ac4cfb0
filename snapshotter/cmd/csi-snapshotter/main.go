// Command csi-snapshotter is Stowage's drop-in replacement for external-snapshotter's csi-snapshotter
// sidecar: it watches the VolumeSnapshotContents of one CSI driver and calls CreateSnapshot, DeleteSnapshot
// and ListSnapshots.
package main

import (
	"context"
	"os"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/sidecar"
	"github.com/stowage-csi/stowage/snapshotter/internal/sidecar/app"
)

func main() {
	scheme, err := app.EventScheme()
	if err != nil {
		klog.ErrorS(err, "Building the Event scheme")
		os.Exit(1)
	}
	var cfg app.Config
	sidecar.Main(sidecar.Options{
		Binary:      app.Binary,
		Defaults:    app.Defaults,
		LockPrefix:  app.LockPrefix,
		Args:        os.Args[1:],
		AddFlags:    cfg.AddFlags,
		Validate:    cfg.Validate,
		Prepare:     app.Prepare,
		EventScheme: scheme,
	}, func(ctx context.Context, env *sidecar.Env) error {
		return app.Run(ctx, env, cfg)
	})
}
