package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/stowage-csi/stowage/e2e/demo"
)

// runDemo installs the EBS storage stack on real nodes on this machine and walks volumes through their life.
func runDemo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("devcluster demo", flag.ContinueOnError)
	opts := demo.Options{Out: os.Stdout}
	fs.BoolVar(&opts.Keep, "keep", false, "leave everything running after the scenarios (with one volume in use) until Ctrl-C")
	fs.StringVar(&opts.Dir, "dir", "", "keep binaries, logs, control-plane data, EC2 data and kubelet roots here (default: a temp dir removed on exit)")
	without := fs.String("without", "", "comma-separated sidecars not to start (csi-provisioner, csi-attacher), to run your own build in their place; the command to run is printed, and the EBS part runs on processes instead of real nodes")
	fs.Float64Var(&opts.TimeScale, "time-scale", 1, "EC2 delays relative to real EC2 (1 = real; 0.05 is 20 times faster)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *without != "" {
		opts.Without = strings.Split(*without, ",")
	}
	if opts.TimeScale <= 0 {
		return fmt.Errorf("--time-scale %g must be positive", opts.TimeScale)
	}
	return demo.Run(ctx, opts)
}
