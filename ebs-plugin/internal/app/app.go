// Package app wires the driver together from a parsed configuration: EC2 client, metadata sources, mounter,
// metrics server and the CSI gRPC server.
package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/cloud"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/driver"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/metadata"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/metrics"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/mounter"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/nvmemetrics"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/params"
	"github.com/stowage-csi/stowage/shared/csiserver"
	"github.com/stowage-csi/stowage/shared/httpserver"
)

// Config is the parsed command line.
type Config struct {
	Mode                driver.Mode
	Endpoint            string
	HTTPEndpoint        string
	MetricsCertFile     string
	MetricsKeyFile      string
	MetadataSources     []string // each --metadata-sources value; repeated flags merge
	Kubeconfig          string
	UserAgentExtra      string
	ExtraTags           []string // each --extra-tags value; repeated flags merge
	KubernetesClusterID string
	WarnOnInvalidTag    bool
	// DeprecatedMetrics also serves the EC2 attempts under upstream's former cloudprovider_aws_api_* names.
	DeprecatedMetrics         bool
	Batching                  bool
	ModifyVolumeWindow        time.Duration
	VolumeAttachLimit         int64
	ReservedVolumeAttachments int
	LegacyXFS                 bool
	DeviceLinkDir             string
	Version                   string
	// NodeName is this node's Node object (CSI_NODE_NAME), for pre-stop-hook.
	NodeName string
	// AWSSDKDebugLog logs every EC2 request and response through klog (--aws-sdk-debug-log).
	AWSSDKDebugLog bool
}

// Validate checks flag combinations, and the values the chosen mode parses, before anything starts; a
// validate-only run (STOWAGE_VALIDATE_ONLY) runs it too. What needs the network is checked later: the region
// from instance metadata when AWS_REGION is unset, the metrics certificate (a mounted Secret) when the endpoint
// is bound.
func (c *Config) Validate() error {
	switch c.Mode {
	case driver.ModeAll, driver.ModeController, driver.ModeNode, ModePreStopHook, ModeMetadataLabeler:
	default:
		return fmt.Errorf("unknown mode %q: want all, controller, node, %s or %s", c.Mode, ModePreStopHook, ModeMetadataLabeler)
	}
	if c.VolumeAttachLimit >= 0 && c.ReservedVolumeAttachments >= 0 {
		return errors.New("--volume-attach-limit and --reserved-volume-attachments are mutually exclusive")
	}
	if (c.MetricsCertFile == "") != (c.MetricsKeyFile == "") {
		return errors.New("--metrics-cert-file and --metrics-key-file must be set together")
	}
	if c.ModifyVolumeWindow <= 0 {
		return fmt.Errorf("--modify-volume-request-handler-timeout %s must be positive", c.ModifyVolumeWindow)
	}
	if c.Mode == ModePreStopHook && c.NodeName == "" {
		// Its Node is the one thing the hook reads of its configuration; the DaemonSet passes it to the hook
		// through the node container's environment.
		return errors.New("pre-stop-hook needs its node's name: set CSI_NODE_NAME")
	}
	if c.Mode == ModePreStopHook || c.Mode == ModeMetadataLabeler {
		return nil // neither serves CSI nor reads the driver's tags and sources
	}
	if _, _, err := csiserver.ParseEndpoint("--endpoint", c.Endpoint); err != nil {
		return err
	}
	if c.Mode != driver.ModeNode && !c.WarnOnInvalidTag {
		if _, err := params.ParseExtraTags(c.ExtraTags...); err != nil {
			return fmt.Errorf("--extra-tags: %w", err)
		}
	}
	if c.Mode != driver.ModeController {
		if _, err := metadata.ParseSources(c.MetadataSources...); err != nil {
			return err
		}
	}
	return nil
}

// Run starts the driver and blocks until ctx ends or serving fails.
func Run(ctx context.Context, c Config) error {
	if c.Mode == ModePreStopHook {
		if err := c.Validate(); err != nil {
			return err
		}
		return runPreStop(ctx, c)
	}
	if c.Mode == ModeMetadataLabeler {
		if err := c.Validate(); err != nil {
			return err
		}
		return runLabeler(ctx, c)
	}
	p, err := build(ctx, c)
	if err != nil {
		return err
	}
	return p.run(ctx)
}

// plugin is the built driver and its metrics server, ready to serve.
type plugin struct {
	driver  *driver.Driver
	metrics *httpserver.Server // nil without --http-endpoint
	// untaint removes the node's startup taint in the background; nil in controller mode or without a
	// Kubernetes client.
	untaint func(context.Context)
}

// build validates c and assembles the plugin. The metrics endpoint is bound last, so a failure before it
// leaves no listener behind, and a port conflict still fails start-up.
func build(ctx context.Context, c Config) (*plugin, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	rec := metrics.New()
	if c.DeprecatedMetrics {
		rec.EmitDeprecated()
	}
	var cloudAPI driver.Cloud
	var tags map[string]string
	if c.Mode != driver.ModeNode {
		rec.TrackDetaches() // upstream's controller has the EC2 collector, its node does not
		cl, t, err := controllerCloud(ctx, c, rec)
		if err != nil {
			return nil, err
		}
		cloudAPI, tags = cl, t
	}
	var mnt driver.Mounter
	var meta driver.MetadataSource
	if c.Mode != driver.ModeController {
		var err error
		if mnt, meta, err = nodeServices(ctx, c); err != nil {
			return nil, err
		}
		// Upstream's node (and all mode) serves the EBS NVMe statistics of its volumes.
		if err := rec.Register(nvmemetrics.New(ctx, nvmemetrics.Config{Source: nvmemetrics.NewSystem(),
			InstanceID: instanceID(meta)})); err != nil {
			return nil, err
		}
	}
	d, err := driver.New(driver.Options{
		Mode:                      c.Mode,
		Endpoint:                  c.Endpoint,
		Version:                   c.Version,
		ExtraTags:                 tags,
		KubernetesClusterID:       c.KubernetesClusterID,
		WarnOnInvalidTag:          c.WarnOnInvalidTag,
		ModifyVolumeWindow:        c.ModifyVolumeWindow,
		VolumeAttachLimit:         c.VolumeAttachLimit,
		ReservedVolumeAttachments: c.ReservedVolumeAttachments,
	}, cloudAPI, mnt, meta)
	if err != nil {
		return nil, err
	}
	p := &plugin{driver: d}
	if c.Mode != driver.ModeController {
		p.untaint = startupTaintRemover(ctx, c)
	}
	if c.HTTPEndpoint != "" {
		if p.metrics, err = listenMetrics(c); err != nil {
			return nil, err
		}
		p.metrics.Handle("/metrics", rec.Handler())
	}
	return p, nil
}

// listenMetrics binds --http-endpoint, over TLS when --metrics-cert-file and --metrics-key-file are set.
func listenMetrics(c Config) (*httpserver.Server, error) {
	if c.MetricsCertFile != "" {
		return httpserver.ListenTLS(c.HTTPEndpoint, c.MetricsCertFile, c.MetricsKeyFile)
	}
	return httpserver.Listen(c.HTTPEndpoint)
}

// run serves CSI and metrics until ctx ends or one of them fails, which stops the other; it returns once
// both have stopped, with the first failure.
func (p *plugin) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if p.untaint != nil {
		// Beside serving, never before it: the kubelet registers the driver, which the removal waits for,
		// only once the CSI socket answers. Its failure stops nothing; it is waited for so it never
		// outlives run.
		untainted := make(chan struct{})
		defer func() {
			cancel()
			<-untainted
		}()
		go func() {
			defer close(untainted)
			p.untaint(ctx)
		}()
	}
	errs := make(chan error, 2)
	servers := 1
	go func() { errs <- p.driver.Run(ctx) }()
	if p.metrics != nil {
		servers++
		go func() { errs <- p.metrics.Serve(ctx) }()
	}
	var first error
	for range servers {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// controllerCloud builds the EC2 client and parses --extra-tags for the controller.
func controllerCloud(ctx context.Context, c Config, rec *metrics.Recorder) (*cloud.Cloud, map[string]string, error) {
	logger := klog.FromContext(ctx)
	tags, err := params.ParseExtraTags(c.ExtraTags...)
	if err != nil {
		if !c.WarnOnInvalidTag {
			return nil, nil, fmt.Errorf("--extra-tags: %w", err)
		}
		logger.Info("Ignoring invalid --extra-tags", "err", err.Error())
		tags = nil
	}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = os.Getenv("AWS_DEFAULT_REGION")
	}
	if region == "" {
		inst, err := metadata.NewIMDS().Get(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("no AWS_REGION and instance metadata unavailable: %w", err)
		}
		region = inst.Region
	}
	ua := "ebs-csi-driver/stowage-" + c.Version
	if c.UserAgentExtra != "" {
		ua += "-" + c.UserAgentExtra
	}
	cl, err := cloud.New(ctx, cloud.Config{Region: region, Batching: c.Batching, UserAgent: sanitizeAppID(ua), Metrics: rec,
		DebugLog: c.AWSSDKDebugLog})
	if err != nil {
		return nil, nil, err
	}
	return cl, tags, nil
}

// nodeServices builds the node's mounter and its instance metadata sources, in --metadata-sources order.
func nodeServices(ctx context.Context, c Config) (driver.Mounter, driver.MetadataSource, error) {
	logger := klog.FromContext(ctx)
	if missing := mounter.ToolsAvailable(); len(missing) > 0 {
		logger.Info("Host tools missing; node operations that need them will fail", "missing", missing)
	}
	names, err := metadata.ParseSources(c.MetadataSources...)
	if err != nil {
		return nil, nil, err
	}
	var sources metadata.Sources
	for _, n := range names {
		switch n {
		case "imds":
			sources = append(sources, metadata.NewIMDS())
		case "kubernetes":
			var nodes metadata.NodeGetter
			if client, err := kubeClient(c); err != nil {
				logger.Info("Kubernetes metadata source has no client", "err", err.Error())
			} else {
				nodes = client.CoreV1().Nodes()
			}
			sources = append(sources, metadata.NewKubernetes(nodes, ""))
		}
	}
	return mounter.New(c.DeviceLinkDir, c.LegacyXFS), sources, nil
}

// instanceID reads this instance's ID from the node's metadata sources.
func instanceID(meta driver.MetadataSource) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		inst, err := meta.Get(ctx)
		if err != nil {
			return "", err
		}
		return inst.InstanceID, nil
	}
}

// sanitizeAppID keeps the SDK's app ID to the characters it allows.
func sanitizeAppID(s string) string {
	out := []rune{}
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' || r == '/' {
			out = append(out, r)
		}
		if len(out) == 50 {
			break
		}
	}
	return string(out)
}
