// Package app wires the driver together from a parsed configuration: EC2 client, metadata sources, mounter,
// metrics server and the CSI gRPC server.
package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/cloud"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/driver"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/metadata"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/metrics"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/mounter"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/params"
)

// Config is the parsed command line.
type Config struct {
	Mode                      driver.Mode
	Endpoint                  string
	HTTPEndpoint              string
	MetricsCertFile           string
	MetricsKeyFile            string
	MetadataSources           string
	Kubeconfig                string
	UserAgentExtra            string
	ExtraTags                 string
	KubernetesClusterID       string
	WarnOnInvalidTag          bool
	Batching                  bool
	ModifyVolumeWindow        time.Duration
	VolumeAttachLimit         int64
	ReservedVolumeAttachments int
	LegacyXFS                 bool
	DeviceLinkDir             string
	Version                   string
}

// Validate checks flag combinations before anything starts.
func (c *Config) Validate() error {
	switch c.Mode {
	case driver.ModeAll, driver.ModeController, driver.ModeNode:
	default:
		return fmt.Errorf("unknown mode %q: want all, controller or node", c.Mode)
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
	return nil
}

// Run starts the driver and blocks until ctx ends or serving fails.
func Run(ctx context.Context, c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	rec := metrics.New()
	if c.HTTPEndpoint != "" {
		addr, err := rec.Serve(ctx, c.HTTPEndpoint, "/metrics", c.MetricsCertFile, c.MetricsKeyFile)
		if err != nil {
			return err
		}
		logger.Info("Serving metrics", "address", addr)
	}

	var tags map[string]string
	var cloudAPI driver.Cloud
	if c.Mode != driver.ModeNode {
		var err error
		if tags, err = params.ParseExtraTags(c.ExtraTags); err != nil {
			if !c.WarnOnInvalidTag {
				return fmt.Errorf("--extra-tags: %w", err)
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
				return fmt.Errorf("no AWS_REGION and instance metadata unavailable: %w", err)
			}
			region = inst.Region
		}
		ua := "ebs-csi-driver/stowage-" + c.Version
		if c.UserAgentExtra != "" {
			ua += "-" + c.UserAgentExtra
		}
		cl, err := cloud.New(ctx, cloud.Config{Region: region, Batching: c.Batching, UserAgent: sanitizeAppID(ua), Metrics: rec})
		if err != nil {
			return err
		}
		cloudAPI = cl
	}

	var mnt driver.Mounter
	var meta driver.MetadataSource
	if c.Mode != driver.ModeController {
		if missing := mounter.ToolsAvailable(); len(missing) > 0 {
			logger.Info("Host tools missing; node operations that need them will fail", "missing", missing)
		}
		mnt = mounter.New(c.DeviceLinkDir, c.LegacyXFS)
		names, err := metadata.ParseSources(c.MetadataSources)
		if err != nil {
			return err
		}
		var sources metadata.Sources
		for _, n := range names {
			switch n {
			case "imds":
				sources = append(sources, metadata.NewIMDS())
			case "kubernetes":
				nodes, err := nodeClient(c.Kubeconfig)
				if err != nil {
					logger.Info("Kubernetes metadata source has no client", "err", err.Error())
				}
				sources = append(sources, metadata.NewKubernetes(nodes, ""))
			}
		}
		meta = sources
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
		return err
	}
	return d.Run(ctx)
}

func nodeClient(kubeconfig string) (metadata.NodeGetter, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return cs.CoreV1().Nodes(), nil
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
