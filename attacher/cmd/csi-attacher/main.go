// Command csi-attacher is Stowage's drop-in replacement for the external-attacher sidecar: it watches
// VolumeAttachments of one CSI driver and calls ControllerPublishVolume/ControllerUnpublishVolume.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/attacher/internal/app"
	"github.com/stowage-csi/stowage/shared/flags"
	"github.com/stowage-csi/stowage/shared/version"
)

func main() {
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	common, err := flags.Register(fs, flags.Defaults{Timeout: app.DefaultTimeout, WorkerThreads: app.DefaultWorkerThreads})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg := app.Config{Common: common}
	fs.DurationVar(&cfg.Resync, "resync", app.DefaultResync, "Resync interval of the controller.")
	fs.IntVar(&cfg.MaxEntries, "max-entries", 0, "Page size of ListVolumes calls in the reconcile; 0 lets the driver choose.")
	fs.StringVar(&cfg.DefaultFSType, "default-fstype", "", "The default filesystem type of the volume to publish. Defaults to empty string.")
	fs.DurationVar(&cfg.ReconcileSync, "reconcile-sync", app.DefaultReconcileSync, "Resync interval of the VolumeAttachment reconciler (ListVolumes).")
	fs.IntVar(&cfg.MaxGRPCLogLength, "max-grpc-log-length", -1, "The maximum amount of characters logged for every gRPC response. Defaults to no limit.")
	_ = fs.Parse(os.Args[1:])

	if common.ShowVersion {
		_ = version.Print(os.Stdout, "csi-attacher")
		return
	}
	if err := logsapi.ValidateAndApply(common.Logging, common.FeatureGates); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := cfg.Validate(); err != nil {
		klog.ErrorS(err, "Invalid command line")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	klog.InfoS("Starting csi-attacher", "version", version.Version)
	if err := app.Run(ctx, cfg); err != nil {
		klog.ErrorS(err, "csi-attacher failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}
