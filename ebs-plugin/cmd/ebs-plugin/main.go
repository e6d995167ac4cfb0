// Command ebs-plugin is the CSI driver ebs.csi.aws.com: ebs-plugin [all|controller|node|pre-stop-hook|metadataLabeler] [flags].
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/app"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/driver"
	"github.com/stowage-csi/stowage/shared/process"
	"github.com/stowage-csi/stowage/shared/version"
)

const binary = "ebs-plugin"

func main() {
	os.Exit(run(os.Args[1:]))
}

// options is the parsed command line: the driver's config plus the compatibility-only flags main handles.
type options struct {
	cfg app.Config
	*process.Flags
	nodeLocal, winHPC bool
	// noEffect lists the flags given on the command line that are accepted only so upstream's manifests
	// keep working; run warns about each.
	noEffect []ignoredFlag
}

// ignoredFlag is a flag that was set but does nothing, and why.
type ignoredFlag struct{ name, reason string }

// noEffectReason says why a compatibility flag does nothing, or ok=false for a flag that works.
func noEffectReason(name string) (reason string, ok bool) {
	switch name {
	case "logtostderr":
		return "logs always go to stderr", true
	case "csi-mount-point-prefix":
		return "the driver's mount points are recognised from the mount table", true
	case "enable-otel-tracing":
		return "Stowage does not export OpenTelemetry traces", true
	case "extra-volume-tags":
		return "deprecated upstream; use --extra-tags", true
	}
	return "", false
}

// parseArgs reads "[mode] [flags]" with upstream's flag names and defaults.
func parseArgs(args []string) (*options, error) {
	mode := driver.ModeAll
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		mode, args = driver.Mode(args[0]), args[1:]
	}
	fs := flag.NewFlagSet(binary, flag.ContinueOnError)
	o := &options{cfg: app.Config{Mode: mode, Version: version.Version}, Flags: process.AddFlags(fs)}
	cfg := &o.cfg
	// Values of the flags that have no effect: parsed, so their syntax is checked, then only warned about.
	var ignoredBool bool
	var ignoredString string

	fs.StringVar(&cfg.Endpoint, "endpoint", "unix://tmp/csi.sock", "CSI endpoint (unix:///path or tcp://host:port).")
	fs.StringVar(&cfg.HTTPEndpoint, "http-endpoint", "", "TCP address for the Prometheus /metrics server (e.g. 0.0.0.0:3301); empty disables it.")
	fs.StringVar(&cfg.MetricsCertFile, "metrics-cert-file", "", "PEM certificate (chain) for the metrics server; with --metrics-key-file it answers HTTPS only.")
	fs.StringVar(&cfg.MetricsKeyFile, "metrics-key-file", "", "PEM private key of --metrics-cert-file.")
	fs.BoolVar(&ignoredBool, "enable-otel-tracing", false, "Accepted for compatibility and without effect: Stowage does not export traces. Warned about when set.")
	cfg.MetadataSources = []string{"imds,kubernetes"}
	fs.Var(&repeated{values: &cfg.MetadataSources}, "metadata-sources", "Comma-separated instance metadata sources, tried in order: imds, kubernetes. Repeated flags merge, in order.")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "Kubeconfig for the kubernetes metadata source; in-cluster configuration when empty.")
	fs.BoolVar(&ignoredBool, "logtostderr", true, "Accepted for compatibility and without effect: logs always go to stderr. Warned about when set.")
	fs.StringVar(&cfg.UserAgentExtra, "user-agent-extra", "", "Extra string appended to the EC2 user agent.")
	fs.BoolVar(&cfg.AWSSDKDebugLog, "aws-sdk-debug-log", false, "Log every EC2 request and response, with bodies, and every retry.")
	fs.Var(&repeated{values: &cfg.ExtraTags}, "extra-tags", "Tags added to every volume and snapshot, as key1=value1,key2=value2, taken as written (class tags override them). Repeated flags merge (a later key wins).")
	fs.StringVar(&cfg.KubernetesClusterID, "k8s-tag-cluster-id", "", "Cluster ID for the kubernetes.io/cluster/<id>=owned tags.")
	fs.StringVar(&ignoredString, "extra-volume-tags", "", "Deprecated and without effect, as upstream; use --extra-tags. Warned about when set.")
	fs.BoolVar(&cfg.WarnOnInvalidTag, "warn-on-invalid-tag", false, "Log and skip invalid tags instead of failing the request.")
	fs.BoolVar(&cfg.DeprecatedMetrics, "deprecated-metrics", false, "Also serve every EC2 attempt as upstream's deprecated cloudprovider_aws_api_* metrics.")
	fs.BoolVar(&o.nodeLocal, "enable-node-local-volumes", false, "Not supported by Stowage; start-up fails when set.")
	fs.BoolVar(&cfg.Batching, "batching", true, "Merge concurrent Describe* calls into batched EC2 requests (Stowage default: true; upstream's code: false).")
	fs.DurationVar(&cfg.ModifyVolumeWindow, "modify-volume-request-handler-timeout", 2*time.Second, "Window in which ControllerExpandVolume and ControllerModifyVolume for one volume are merged into one ModifyVolume.")
	fs.Int64Var(&cfg.VolumeAttachLimit, "volume-attach-limit", -1, "Maximum volumes per node reported to Kubernetes; -1 computes it from the instance.")
	fs.IntVar(&cfg.ReservedVolumeAttachments, "reserved-volume-attachments", -1, "Attachment slots reserved for volumes not managed by CSI; -1 counts them from instance metadata.")
	fs.BoolVar(&o.winHPC, "windows-host-process", false, "Not supported by Stowage (Linux only); start-up fails when set.")
	fs.BoolVar(&cfg.LegacyXFS, "legacy-xfs", false, "Format XFS without features kernels older than 5.10 cannot mount (bigtime, inobtcount, reflink, nrext64).")
	fs.StringVar(&ignoredString, "csi-mount-point-prefix", "", "Accepted for compatibility and without effect: mount points are recognised from the mount table. Warned about when set.")
	fs.StringVar(&cfg.DeviceLinkDir, "device-link-dir", "/dev/disk/by-id", "Directory holding the NVMe by-id links (nvme-Amazon_Elastic_Block_Store_vol...). Stowage addition, for tests and unusual udev setups.")

	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) {
		if reason, ok := noEffectReason(f.Name); ok {
			o.noEffect = append(o.noEffect, ignoredFlag{name: "--" + f.Name, reason: reason})
		}
	})
	return o, nil
}

// warnNoEffect names each flag that was set but does nothing, so nobody relies on it unknowingly.
func warnNoEffect(logger klog.Logger, flags []ignoredFlag) {
	for _, f := range flags {
		logger.Info("WARNING: flag has no effect", "flag", f.name, "reason", f.reason)
	}
}

func run(args []string) int {
	o, err := parseArgs(args)
	if err != nil {
		return process.ParseFailed(os.Stderr, binary, err)
	}
	cfg := o.cfg
	cfg.NodeName = os.Getenv("CSI_NODE_NAME")
	if o.ShowVersion {
		_ = version.Print(os.Stdout, binary)
		return 0
	}
	return process.Main(os.Stderr, binary, o.Logging, func(ctx context.Context) error {
		switch {
		case o.nodeLocal:
			return process.UsageError{Err: errors.New("--enable-node-local-volumes is not supported")}
		case o.winHPC:
			return process.UsageError{Err: errors.New("--windows-host-process is not supported")}
		}
		warnNoEffect(klog.FromContext(ctx), o.noEffect)
		if err := cfg.Validate(); err != nil {
			return process.UsageError{Err: err}
		}
		// Every check of the mode, flags and environment that needs no network has passed.
		if done, err := process.EndIfValidateOnly(os.Getenv, os.Stdout, binary); err != nil || done {
			return err
		}
		return app.Run(ctx, cfg)
	})
}

// repeated is a flag that keeps every value it is given, because upstream merges repeated --extra-tags and
// --metadata-sources where Go's flag package would keep the last. The first value replaces the default.
type repeated struct {
	values *[]string
	set    bool
}

func (r *repeated) String() string {
	if r == nil || r.values == nil {
		return ""
	}
	return strings.Join(*r.values, ",")
}

func (r *repeated) Set(v string) error {
	if !r.set {
		*r.values, r.set = nil, true
	}
	*r.values = append(*r.values, v)
	return nil
}
