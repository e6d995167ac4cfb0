package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/stowage-csi/stowage/e2e/cluster"
)

// runUp starts the control plane, prints how to reach it, and tears it down when ctx ends.
func runUp(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("devcluster up", flag.ContinueOnError)
	var opts cluster.Options
	fs.StringVar(&opts.Dir, "dir", "", "keep the control plane's data, kubeconfigs and logs here (default: a temp dir removed on exit)")
	fs.StringVar(&opts.CacheDir, "cache-dir", "", "binary cache (default: $"+cluster.CacheDirEnv+", else .cache at the repository root)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}

	c, err := cluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("export KUBECONFIG=%s\n", c.Kubeconfig())
	fmt.Fprintln(os.Stderr, "Control plane running; press Ctrl-C to stop it.")
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "Stopping control plane.")
	return c.Stop()
}
