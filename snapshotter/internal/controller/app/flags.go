package app

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strings"
	"time"

	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	// Registers --logging-format=json, which upstream's snapshot-controller accepts too.
	_ "k8s.io/component-base/logs/json/register"

	"github.com/stowage-csi/stowage/shared/flags"
)

// Binary and LockName are upstream's: the Lease is shared with upstream replicas during a rolling swap.
const (
	Binary   = "snapshot-controller"
	LockName = "snapshot-controller-leader"
)

// Upstream's gates (external-snapshotter pkg/features), besides the logging ones.
const (
	CSIVolumeGroupSnapshot featuregate.Feature = "CSIVolumeGroupSnapshot"
)

// DefaultKubeAPIQPS and DefaultKubeAPIBurst are the limits against an API server without API Priority and
// Fairness, as for every Stowage sidecar (shared/flags); against one with APF, and when neither flag is given,
// there is no client-side limit: upstream's 5 QPS is snapshot-controller's most reported scale limit
// (external-snapshotter#1344: 80 snapshots took 143 s instead of 17 s). An explicit value is honoured exactly.
const (
	DefaultKubeAPIQPS   = 20
	DefaultKubeAPIBurst = 100
)

// Config is snapshot-controller's flag set: upstream's, name for name (no --csi-address, no
// --metrics-address, no --leader-election-labels, no --timeout), with one default changed (--kube-api-qps).
type Config struct {
	ShowVersion  bool
	Kubeconfig   string
	ResyncPeriod time.Duration
	Workers      int

	LeaderElection              bool
	LeaderElectionNamespace     string
	LeaderElectionLeaseDuration time.Duration
	LeaderElectionRenewDeadline time.Duration
	LeaderElectionRetryPeriod   time.Duration

	KubeAPIQPS   float64
	KubeAPIBurst int
	// KubeAPIRateSet is true when --kube-api-qps or --kube-api-burst was given.
	KubeAPIRateSet bool

	HTTPEndpoint string
	MetricsPath  string

	RetryIntervalStart            time.Duration
	RetryIntervalMax              time.Duration
	EnableDistributedSnapshotting bool
	PreventVolumeModeConversion   bool
	RetryCRDIntervalMax           time.Duration
	Automaxprocs                  bool

	FeatureGates featuregate.MutableVersionedFeatureGate
	Logging      *logsapi.LoggingConfiguration
}

// NewFlagSet registers the flags into a new flag set and returns it with the Config it fills.
func NewFlagSet() (*flag.FlagSet, *Config, error) {
	c := &Config{FeatureGates: featuregate.NewFeatureGate(), Logging: logsapi.NewLoggingConfiguration()}
	if err := logsapi.AddFeatureGates(c.FeatureGates); err != nil {
		return nil, nil, fmt.Errorf("adding logging feature gates: %w", err)
	}
	if err := c.FeatureGates.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		CSIVolumeGroupSnapshot:            {Default: true, PreRelease: featuregate.GA},
		flags.ReleaseLeaderElectionOnExit: {Default: true, PreRelease: featuregate.Beta},
	}); err != nil {
		return nil, nil, fmt.Errorf("adding feature gates: %w", err)
	}
	fs := flag.NewFlagSet(Binary, flag.ContinueOnError)
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "Absolute path to the kubeconfig file. Required only when running out of cluster.")
	fs.DurationVar(&c.ResyncPeriod, "resync-period", 15*time.Minute, "Resync interval of the controller.")
	fs.BoolVar(&c.ShowVersion, "version", false, "Show version.")
	fs.IntVar(&c.Workers, "worker-threads", 10, "Number of worker threads.")

	fs.BoolVar(&c.LeaderElection, "leader-election", false, "Enables leader election.")
	fs.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", "", "The namespace where the leader election resource exists. Defaults to the pod namespace if not set.")
	fs.DurationVar(&c.LeaderElectionLeaseDuration, "leader-election-lease-duration", flags.DefaultLeaseDuration, "Duration, in seconds, that non-leader candidates will wait to force acquire leadership. Defaults to 15 seconds.")
	fs.DurationVar(&c.LeaderElectionRenewDeadline, "leader-election-renew-deadline", flags.DefaultRenewDeadline, "Duration, in seconds, that the acting leader will retry refreshing leadership before giving up. Defaults to 10 seconds.")
	fs.DurationVar(&c.LeaderElectionRetryPeriod, "leader-election-retry-period", flags.DefaultRetryPeriod, "Duration, in seconds, the LeaderElector clients should wait between tries of actions. Defaults to 5 seconds.")

	fs.Float64Var(&c.KubeAPIQPS, "kube-api-qps", DefaultKubeAPIQPS, "QPS to use while communicating with the kubernetes apiserver. When neither this nor --kube-api-burst is given, no client-side limit against an API server with API Priority and Fairness, else 20 (upstream: 5). A negative value means no client-side limit.")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", DefaultKubeAPIBurst, "Burst to use while communicating with the kubernetes apiserver. Stowage's default is 100 (upstream: 10); see --kube-api-qps.")

	fs.StringVar(&c.HTTPEndpoint, "http-endpoint", "", "The TCP network address where the HTTP server for diagnostics, including metrics, will listen (example: :8080). The default is empty string, which means the server is disabled.")
	fs.StringVar(&c.MetricsPath, "metrics-path", flags.DefaultMetricsPath, "The HTTP path where prometheus metrics will be exposed. Default is `/metrics`.")
	fs.DurationVar(&c.RetryIntervalStart, "retry-interval-start", flags.DefaultRetryIntervalStart, "Initial retry interval of failed volume snapshot creation or deletion. It doubles with each failure, up to retry-interval-max. Default is 1 second.")
	fs.DurationVar(&c.RetryIntervalMax, "retry-interval-max", flags.DefaultRetryIntervalMax, "Maximum retry interval of failed volume snapshot creation or deletion. Default is 5 minutes.")
	fs.BoolVar(&c.EnableDistributedSnapshotting, "enable-distributed-snapshotting", false, "Enables each node to handle snapshotting for the local volumes created on that node")
	fs.BoolVar(&c.PreventVolumeModeConversion, "prevent-volume-mode-conversion", true, "Prevents an unauthorised user from modifying the volume mode when creating a PVC from an existing VolumeSnapshot.")
	fs.DurationVar(&c.RetryCRDIntervalMax, "retry-crd-interval-max", 30*time.Second, "Maximum time to wait for CRDs to appear. The default is 30 seconds.")
	fs.BoolVar(&c.Automaxprocs, "automaxprocs", false, "automatically set GOMAXPROCS to match Linux container CPU quota")
	fs.Var(gatesValue{c.FeatureGates}, "feature-gates", "Comma-separated list of key=value pairs that describe feature gates for alpha/experimental features. Options are:\n"+strings.Join(c.FeatureGates.KnownFeatures(), "\n"))
	logsapi.AddGoFlags(c.Logging, fs)
	return fs, c, nil
}

// Validate checks the parsed values; each error names the flag.
func (c *Config) Validate() error {
	var errs []error
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("--worker-threads must be at least 1, got %d", c.Workers))
	}
	if c.ResyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("--resync-period must not be negative, got %s", c.ResyncPeriod))
	}
	if c.RetryIntervalStart <= 0 || c.RetryIntervalMax < c.RetryIntervalStart {
		errs = append(errs, fmt.Errorf("--retry-interval-start (%s) must be positive and not exceed --retry-interval-max (%s)", c.RetryIntervalStart, c.RetryIntervalMax))
	}
	if c.LeaderElectionRenewDeadline >= c.LeaderElectionLeaseDuration {
		errs = append(errs, fmt.Errorf("--leader-election-renew-deadline (%s) must be less than --leader-election-lease-duration (%s)", c.LeaderElectionRenewDeadline, c.LeaderElectionLeaseDuration))
	}
	if float64(c.LeaderElectionRenewDeadline) <= 1.2*float64(c.LeaderElectionRetryPeriod) {
		errs = append(errs, fmt.Errorf("--leader-election-renew-deadline (%s) must be greater than 1.2 x --leader-election-retry-period (%s)", c.LeaderElectionRenewDeadline, c.LeaderElectionRetryPeriod))
	}
	if math.IsNaN(c.KubeAPIQPS) || math.IsInf(c.KubeAPIQPS, 0) {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be a finite number, got %v", c.KubeAPIQPS))
	}
	if c.KubeAPIQPS > 0 && c.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be at least 1 when --kube-api-qps is positive, got %d", c.KubeAPIBurst))
	}
	if !strings.HasPrefix(c.MetricsPath, "/") {
		errs = append(errs, fmt.Errorf("--metrics-path %q must start with /", c.MetricsPath))
	}
	return errors.Join(errs...)
}

// gatesValue adapts the feature gate to flag.Value.
type gatesValue struct {
	gate featuregate.MutableVersionedFeatureGate
}

func (v gatesValue) String() string {
	if s, ok := v.gate.(fmt.Stringer); ok && v.gate != nil {
		return s.String()
	}
	return ""
}

func (v gatesValue) Set(value string) error { return v.gate.Set(value) }
