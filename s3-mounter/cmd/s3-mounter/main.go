// Command s3-mounter is the Mountpoint Pod's entry point, a drop-in for upstream's aws-s3-csi-mounter: it
// receives the mount options and the FUSE fd from the node plugin on <comm-dir>/mount.sock and runs
// <mountpoint-bin-dir>/mount-s3 on them.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/s3-mounter/internal/mounter"
	"github.com/stowage-csi/stowage/shared/version"
)

const (
	binaryName = "s3-mounter"
	// defaultCommDir is where the Mountpoint Pod mounts its comm emptyDir (shared/s3api.CommDir). It is
	// repeated here because s3api's CRD types would pull apimachinery into this small unprivileged binary.
	defaultCommDir = "/comm"
	// defaultBinDir is where upstream's image, and Stowage's, put mount-s3.
	defaultBinDir = "/mountpoint-s3/bin"
)

func main() {
	fs := flag.NewFlagSet(binaryName, flag.ExitOnError)
	klog.InitFlags(fs)
	binDir := os.Getenv("MOUNTPOINT_BIN_DIR")
	if binDir == "" {
		binDir = defaultBinDir
	}
	cfg := mounter.Config{Stdout: os.Stdout, Stderr: os.Stderr}
	fs.DurationVar(&cfg.RecvTimeout, "mount-sock-recv-timeout", 2*time.Minute, "How long to wait for the node plugin's mount options.")
	fs.StringVar(&cfg.BinDir, "mountpoint-bin-dir", binDir, "Directory holding the mount-s3 executable (env MOUNTPOINT_BIN_DIR).")
	fs.StringVar(&cfg.CommDir, "comm-dir", defaultCommDir, "Directory shared with the node plugin: mount.sock, mount.err, mount.exit.")
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	_ = fs.Parse(os.Args[1:])
	if *showVersion {
		_ = version.Print(os.Stdout, binaryName)
		return
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "%s: unexpected arguments %q\n", binaryName, fs.Args())
		os.Exit(2)
	}
	logger := klog.Background().WithName(binaryName)
	logger.Info("Starting", "version", version.Version)
	code := mounter.Run(klog.NewContext(context.Background(), logger), cfg)
	klog.Flush()
	os.Exit(code)
}
