package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/stowage-csi/stowage/e2e/ebsinstall"
	"github.com/stowage-csi/stowage/e2e/ebsstack"
)

// ebsPart is where the EBS scenarios run: real nodes with the chart installed, or, when the user runs a
// sidecar of their own (Options.Without), the process stack that sidecar joins.
type ebsPart struct {
	platform ebsstack.Platform
	stop     func(ctx context.Context) error
	// logTails are the components' last log lines, for a failed run.
	logTails func(lines int) string
	// kubeconfig, ec2URL and logs are what --keep prints.
	kubeconfig, ec2URL, logs string
}

// startEBS starts the EBS part. Real nodes need no sidecar left out: the chart runs them all, and a sidecar
// of the user's would run as a process outside the cluster, which only the process stack waits for.
func startEBS(ctx context.Context, opts Options, out io.Writer, progress func(string, ...any)) (*ebsPart, error) {
	if len(opts.Without) > 0 {
		return startProcessStack(ctx, opts, out, progress)
	}
	zone := func(z string) string { return ebsinstall.Region + z }
	s, err := ebsinstall.Start(ctx, ebsinstall.Options{
		Zones: []string{zone("a"), zone("a"), zone("b")}, TimeScale: opts.TimeScale, Dir: opts.Dir, Progress: progress,
	})
	if err != nil {
		return nil, err
	}
	p, err := ebsstack.OnRealNodes(ctx, s)
	if err != nil {
		return nil, errors.Join(err, s.Stop(context.WithoutCancel(ctx)))
	}
	var logs []string
	for _, n := range s.Cluster.Nodes {
		logs = append(logs, n.LogDir())
	}
	return &ebsPart{
		platform: p, stop: s.Stop,
		logTails: func(lines int) string {
			return s.Cluster.LogTail(lines) + "\n" + s.Cluster.NodeLogTail(lines)
		},
		kubeconfig: s.Cluster.Kubeconfig(), ec2URL: s.EC2.URL(), logs: strings.Join(logs, " "),
	}, nil
}

// startProcessStack starts ebsstack's processes without the sidecars the user runs, and prints how to run them.
func startProcessStack(ctx context.Context, opts Options, out io.Writer, progress func(string, ...any)) (*ebsPart, error) {
	// Every Stowage sidecar runs: the snapshot scenario needs csi-snapshotter and snapshot-controller, the
	// expand-and-modify one csi-resizer.
	with := append([]string{"csi-resizer"}, ebsstack.SnapshotSidecars...)
	s, err := ebsstack.Start(ctx, ebsstack.Options{TimeScale: opts.TimeScale, Dir: opts.Dir, Without: opts.Without, With: with, Progress: progress})
	if err != nil {
		return nil, err
	}
	for _, name := range opts.Without {
		module := map[string]string{"csi-provisioner": "provisioner", "csi-attacher": "attacher"}[name]
		fmt.Fprintf(out, "==> %s is left out; the scenarios wait (up to %s per step) for yours. From the repository root, run:\n\n"+
			"  (cd %s && %s go run ./cmd/%s %s)\n\n", name, ebsstack.StepTimeout, module, strings.Join(s.SidecarEnv(name), " "), name,
			strings.Join(s.SidecarArgs(name), " "))
	}
	return &ebsPart{
		platform: ebsstack.OnStack(s), stop: func(context.Context) error { return s.Stop() }, logTails: s.LogTails,
		kubeconfig: s.Kubeconfig(), ec2URL: s.EC2.URL(), logs: s.Dir + "/logs and " + s.Dir + "/cluster/logs",
	}, nil
}
