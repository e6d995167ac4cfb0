// Package registrar is Stowage's node-driver-registrar: it learns the CSI driver's name from the driver's
// socket and serves the kubelet's plugin registration API (k8s.io/kubelet/pkg/apis/pluginregistration/v1) on
// <plugin-registration-path>/<driver>-reg.sock, where the kubelet's plugin watcher finds it and registers the
// driver's socket (--kubelet-registration-path) for its CSI node calls.
package registrar

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Binary is the program name, as upstream's image calls it.
const Binary = "csi-node-driver-registrar"

// Modes of --mode. Upstream (since v2.9) defaults to "" and treats every value but
// ModeKubeletRegistrationProbe as registration.
const (
	ModeRegistration             = "registration"
	ModeKubeletRegistrationProbe = "kubelet-registration-probe"
)

// Upstream's defaults.
const (
	DefaultCSIAddress             = "/run/csi/socket"
	DefaultPluginRegistrationPath = "/registration"
	DefaultTimeout                = time.Second
)

// pluginAPIVersion is the one plugin API version GetInfo offers, as upstream's.
const pluginAPIVersion = "1.0.0"

// Config holds the registrar's flags, with upstream node-driver-registrar v2.17's names and defaults.
type Config struct {
	CSIAddress              string
	KubeletRegistrationPath string
	PluginRegistrationPath  string
	// HealthPort is the deprecated --health-port: > 0 serves /healthz on ":<port>", <= 0 disables it.
	HealthPort   int
	HTTPEndpoint string
	Mode         string
	Timeout      time.Duration
	// ConnectionTimeout is accepted and ignored, as upstream does since v2.0.
	ConnectionTimeout time.Duration
	EnablePprof       bool
}

// AddFlags registers the registrar's flags on fs and returns the config they fill.
func AddFlags(fs *flag.FlagSet) *Config {
	c := &Config{}
	fs.StringVar(&c.CSIAddress, "csi-address", DefaultCSIAddress, "Path of the CSI driver socket that the node-driver-registrar will connect to.")
	fs.StringVar(&c.KubeletRegistrationPath, "kubelet-registration-path", "", "Path of the CSI driver socket on the Kubernetes host machine (required).")
	fs.StringVar(&c.PluginRegistrationPath, "plugin-registration-path", DefaultPluginRegistrationPath, "Path to Kubernetes plugin registration directory.")
	fs.IntVar(&c.HealthPort, "health-port", 0, "(deprecated) TCP port for healthz requests. Set to 0 to disable the healthz server. Only one of `--health-port` and `--http-endpoint` can be set.")
	fs.StringVar(&c.HTTPEndpoint, "http-endpoint", "", "The TCP network address where the HTTP server for diagnostics, including pprof and the health check indicating whether the registration socket exists, will listen (example: `:8080`). The default is empty string, which means the server is disabled. Only one of `--health-port` and `--http-endpoint` can be set.")
	fs.StringVar(&c.Mode, "mode", ModeRegistration, `"registration" (any value but the next) registers the driver with the kubelet and keeps serving. "kubelet-registration-probe" runs as an exec liveness probe: it exits 0 when a registrar in this container answers on the registration socket for --kubelet-registration-path, 1 otherwise.`)
	fs.DurationVar(&c.Timeout, "timeout", DefaultTimeout, "Timeout for waiting for communication with driver.")
	fs.DurationVar(&c.ConnectionTimeout, "connection-timeout", 0, "The --connection-timeout flag is deprecated and has no effect.")
	fs.BoolVar(&c.EnablePprof, "enable-pprof", false, "Enable pprof profiling on the TCP network address specified by --http-endpoint.")
	return c
}

// Validate checks the parsed flags; each error names the flag at fault.
func (c *Config) Validate() error {
	var errs []error
	if c.KubeletRegistrationPath == "" {
		errs = append(errs, errors.New("--kubelet-registration-path is a required parameter"))
	}
	if c.HealthPort > 0 && c.HTTPEndpoint != "" {
		errs = append(errs, errors.New("only one of --health-port and --http-endpoint can be set"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout must be positive, got %s", c.Timeout))
	}
	if c.Mode != ModeKubeletRegistrationProbe && strings.TrimPrefix(c.CSIAddress, "unix://") == "" {
		errs = append(errs, errors.New("--csi-address must not be empty"))
	}
	if c.PluginRegistrationPath == "" {
		errs = append(errs, errors.New("--plugin-registration-path must not be empty"))
	}
	return errors.Join(errs...)
}

// Probing tells whether --mode asks for the exec probe instead of the registrar.
func (c *Config) Probing() bool { return c.Mode == ModeKubeletRegistrationProbe }

// Endpoint is the address of the diagnostics HTTP server: ":<--health-port>", --http-endpoint, or "" for none.
func (c *Config) Endpoint() string {
	if c.HealthPort > 0 {
		return ":" + strconv.Itoa(c.HealthPort)
	}
	return c.HTTPEndpoint
}

// SocketPath is the registration socket of driver, where the kubelet's plugin watcher looks for it.
func (c *Config) SocketPath(driver string) string {
	return filepath.Join(c.PluginRegistrationPath, driver+"-reg.sock")
}
