// Command s3-node is the CSI node plugin s3.csi.aws.com, a drop-in for the node container of the
// Mountpoint for Amazon S3 CSI driver v2 (aws-s3-csi-driver), with its flags and environment.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/stowage-csi/stowage/s3-node/internal/app"
	"github.com/stowage-csi/stowage/s3-node/internal/unmounter"
	"github.com/stowage-csi/stowage/shared/process"
	"github.com/stowage-csi/stowage/shared/s3api"
	"github.com/stowage-csi/stowage/shared/version"
)

const binary = "s3-node"

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// options is the parsed command line and environment.
type options struct {
	cfg app.Config
	*process.Flags
}

func parseArgs(args []string, getenv func(string) string) (*options, error) {
	fs := flag.NewFlagSet(binary, flag.ContinueOnError)
	o := &options{Flags: process.AddFlags(fs)}
	c := &o.cfg
	c.Version, c.Env = version.Version, getenv
	fs.StringVar(&c.Endpoint, "endpoint", "unix://tmp/csi.sock", "CSI endpoint (unix:///path or tcp://host:port).")
	fs.StringVar(&c.NodeID, "node-id", getenv("CSI_NODE_NAME"), "This node's name (default $CSI_NODE_NAME); required.")
	fs.StringVar(&c.MountpointVersion, "mp-version", getenv("MOUNTPOINT_VERSION"), "Mountpoint version, reported in --version (default $MOUNTPOINT_VERSION).")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "Kubeconfig; in-cluster configuration when empty. Stowage addition, for running outside a Pod.")
	fs.DurationVar(&c.UnmountInterval, "unmount-sweep-interval", unmounter.DefaultInterval, "How often Mountpoint Pods marked needs-unmount and dangling source mounts are looked for, besides Pod updates. Stowage addition (upstream: fixed 2m).")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.Namespace = getenv("MOUNTPOINT_NAMESPACE")
	if c.Namespace == "" {
		c.Namespace = s3api.DefaultMountpointNamespace
	}
	c.KubeletPath = getenv("CONTAINER_KUBELET_PATH")
	if c.KubeletPath == "" {
		c.KubeletPath = "/var/lib/kubelet"
	}
	return o, nil
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args, getenv)
	if err != nil {
		return process.ParseFailed(stderr, binary, err)
	}
	if o.ShowVersion {
		_, _ = fmt.Fprintf(stdout, "%s %s (Mountpoint %s)\n", binary, version.Version, o.cfg.MountpointVersion)
		return 0
	}
	return process.Main(stderr, binary, o.Logging, func(ctx context.Context) error {
		if err := o.cfg.Validate(); err != nil {
			return process.UsageError{Err: err}
		}
		// Flags and environment have passed every check that needs no network.
		if done, err := process.EndIfValidateOnly(getenv, stdout, binary); err != nil || done {
			return err
		}
		return app.Run(ctx, o.cfg)
	})
}
