// Command snapshot-controller is Stowage's drop-in replacement for upstream's snapshot-controller
// (external-snapshotter): it binds VolumeSnapshots to VolumeSnapshotContents cluster-wide, for every driver.
package main

import (
	"context"
	"os"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/signals"
	"github.com/stowage-csi/stowage/snapshotter/internal/controller/app"
)

func main() {
	cfg, err := app.Parse(os.Args[1:], os.Stdout)
	if err != nil {
		klog.ErrorS(err, "Invalid command line")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	if cfg == nil {
		return
	}
	ctx, stop := signals.Context(context.Background(), nil)
	err = app.Run(ctx, cfg)
	stop()
	if err != nil {
		klog.ErrorS(err, "snapshot-controller failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}
