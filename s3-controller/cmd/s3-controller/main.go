// Command s3-controller is Stowage's drop-in for the Mountpoint for Amazon S3 CSI driver's
// aws-s3-csi-controller: it runs the Mountpoint Pods that serve workloads' S3 volumes.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"

	"github.com/stowage-csi/stowage/s3-controller/internal/app"
	"github.com/stowage-csi/stowage/s3-controller/internal/config"
	"github.com/stowage-csi/stowage/shared/version"
)

func main() {
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	klog.InitFlags(fs)
	cfg := config.Register(fs, os.Getenv)
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: a bad flag exits with usage
	if *showVersion {
		fmt.Println(version.String("s3-controller"))
		return
	}
	logger := klog.Background()
	if err := cfg.Parse(func(msg string, kv ...any) { logger.Info(msg, kv...) }); err != nil {
		logger.Error(err, "Invalid flags")
		klog.FlushAndExit(klog.ExitFlushTimeout, 2)
	}
	ctx := klog.NewContext(signals.SetupSignalHandler(), logger)
	if err := app.Run(ctx, cfg); err != nil {
		logger.Error(err, "s3-controller failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}
