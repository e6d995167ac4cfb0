// Package liveness is Stowage's livenessprobe: an HTTP /healthz that calls the CSI driver's Probe over its
// socket, for the kubelet's httpGet liveness probe on the driver's container.
package liveness

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"time"
)

// Binary is the program name, as upstream's image calls it.
const Binary = "livenessprobe"

// Upstream livenessprobe v2.19's defaults.
const (
	DefaultCSIAddress   = "/run/csi/socket"
	DefaultProbeTimeout = time.Second
	DefaultHealthPort   = "9808"
	DefaultMetricsPath  = "/metrics"
)

// Config holds the livenessprobe's flags, with upstream's names and defaults.
type Config struct {
	CSIAddress   string
	ProbeTimeout time.Duration
	// HealthPort is the deprecated --health-port: /healthz on 0.0.0.0:<port> unless --http-endpoint is set. A
	// string, as upstream's.
	HealthPort     string
	HTTPEndpoint   string
	MetricsAddress string
	MetricsPath    string
}

// AddFlags registers the livenessprobe's flags on fs and returns the config they fill.
func AddFlags(fs *flag.FlagSet) *Config {
	c := &Config{}
	fs.StringVar(&c.CSIAddress, "csi-address", DefaultCSIAddress, "Address of the CSI driver socket.")
	fs.DurationVar(&c.ProbeTimeout, "probe-timeout", DefaultProbeTimeout, "Probe timeout in seconds.")
	fs.StringVar(&c.HealthPort, "health-port", DefaultHealthPort, fmt.Sprintf("(deprecated) TCP ports for listening healthz requests. The default is `%s`. If set, `--http-endpoint` cannot be set.", DefaultHealthPort))
	fs.StringVar(&c.MetricsAddress, "metrics-address", "", "(deprecated) The TCP network address where the prometheus metrics endpoint will listen (example: `:8080`). The default is empty string, which means metrics endpoint is disabled. If set, `--http-endpoint` cannot be set.")
	fs.StringVar(&c.HTTPEndpoint, "http-endpoint", "", "The TCP network address where the HTTP server for diagnostics, including CSI driver health check and metrics. The default is empty string, which means the server is disabled. If set, `--health-port` and `--metrics-address` cannot be explicitly set.")
	fs.StringVar(&c.MetricsPath, "metrics-path", DefaultMetricsPath, "The HTTP path where prometheus metrics will be exposed. Default is `/metrics`.")
	return c
}

// Validate checks the parsed flags; each error names the flag at fault. Like upstream, --health-port counts
// as set when it differs from its default.
func (c *Config) Validate() error {
	var errs []error
	if c.HealthPort != DefaultHealthPort && c.HTTPEndpoint != "" {
		errs = append(errs, errors.New("only one of --health-port and --http-endpoint can be explicitly set"))
	}
	if c.MetricsAddress != "" && c.HTTPEndpoint != "" {
		errs = append(errs, errors.New("only one of --metrics-address and --http-endpoint can be explicitly set"))
	}
	if c.ProbeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--probe-timeout must be positive, got %s", c.ProbeTimeout))
	}
	if strings.TrimPrefix(c.CSIAddress, "unix://") == "" {
		errs = append(errs, errors.New("--csi-address must not be empty"))
	}
	if !strings.HasPrefix(c.MetricsPath, "/") {
		errs = append(errs, fmt.Errorf("--metrics-path %q must start with /", c.MetricsPath))
	}
	return errors.Join(errs...)
}

// HealthAddress is where /healthz is served: --http-endpoint, else 0.0.0.0:<--health-port>.
func (c *Config) HealthAddress() string {
	if c.HTTPEndpoint != "" {
		return c.HTTPEndpoint
	}
	return net.JoinHostPort("0.0.0.0", c.HealthPort)
}
