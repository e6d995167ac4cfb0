// Package flags registers the command-line flags every Stowage sidecar shares with the upstream CSI sidecars
// (csi-lib-utils standardflags plus the per-sidecar --timeout, --worker-threads and retry intervals), with
// upstream's names, defaults and meaning, so a Deployment written for an upstream image works unchanged.
//
// Flags go into a *flag.FlagSet (Go's flag package, like upstream), so both -flag and --flag work.
package flags

import (
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	// The API server's gates, registered in utilfeature's registry by this package's init.
	_ "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	// Registers --logging-format=json, which upstream sidecars accept too.
	_ "k8s.io/component-base/logs/json/register"
)

// Upstream defaults that Stowage keeps.
const (
	DefaultCSIAddress         = "/run/csi/socket"
	DefaultLeaseDuration      = 15 * time.Second
	DefaultRenewDeadline      = 10 * time.Second
	DefaultRetryPeriod        = 5 * time.Second
	DefaultMetricsPath        = "/metrics"
	DefaultRetryIntervalStart = time.Second
	DefaultRetryIntervalMax   = 5 * time.Minute
)

// DefaultKubeAPIQPS and DefaultKubeAPIBurst deliberately differ from upstream's 5 and 10. Upstream's limits date
// from before API Priority and Fairness; today the API server protects itself, and 5 QPS is the sidecars' most
// reported scale problem (kubernetes-csi/external-provisioner#68 and kubernetes-csi/external-provisioner#211:
// about 4 volumes/s; kubernetes-csi/external-snapshotter#1344: 80 snapshots in 143 s instead of 17 s). 20/100
// lets a burst of work through while staying a polite client.
const (
	DefaultKubeAPIQPS   = 20.0
	DefaultKubeAPIBurst = 100
)

// ReleaseLeaderElectionOnExit is the upstream feature gate (alpha, off upstream) that drains workers on SIGTERM
// and then releases the lease. Stowage turns it on by default, so a standby takes over in seconds instead of a
// lease duration; --feature-gates=ReleaseLeaderElectionOnExit=false restores upstream's behaviour.
const ReleaseLeaderElectionOnExit featuregate.Feature = "ReleaseLeaderElectionOnExit"

// Defaults are the per-sidecar defaults of the shared flags: upstream's sidecars disagree on these
// (attacher --timeout 15s and 10 workers, provisioner 10s and 100, snapshotter 1m and 10), and each registers
// feature gates of its own.
type Defaults struct {
	Timeout       time.Duration
	WorkerThreads int
	// Gates are the sidecar's own feature gates, the ones its upstream registers besides the common ones
	// (ReleaseLeaderElectionOnExit, the logging gates, AllAlpha and AllBeta), which Register adds for all.
	Gates []Gate
	// Without names shared flags the binary's upstream does not have (snapshot-controller, which talks to no
	// CSI driver, has no --csi-address, --timeout, --metrics-address or --leader-election-labels): they are
	// not registered, so a command line that sets one fails as upstream's would, and not validated.
	Without []string
}

// Gate is one feature gate a sidecar accepts on --feature-gates, so that an upstream manifest that sets it
// starts Stowage's binary too.
type Gate struct {
	Name featuregate.Feature
	// Spec carries upstream's default and maturity.
	Spec featuregate.FeatureSpec
	// NoEffect, when not empty, says why Stowage does not act on the gate; the sidecar warns once at start-up
	// when the gate is set away from its default, since whoever set it expects a change that does not happen.
	NoEffect string
}

// Common holds the parsed values of the shared flags.
type Common struct {
	ShowVersion bool
	Kubeconfig  string
	CSIAddress  string

	LeaderElection              bool
	LeaderElectionNamespace     string
	LeaderElectionLeaseDuration time.Duration
	LeaderElectionRenewDeadline time.Duration
	LeaderElectionRetryPeriod   time.Duration
	LeaderElectionLabels        Labels

	KubeAPIQPS   float64
	KubeAPIBurst int
	// KubeAPIRateSet is true when --kube-api-qps or --kube-api-burst was given (see Parsed). Without either,
	// the process runs without a client-side limiter against an API server with API Priority and Fairness,
	// and with the two defaults otherwise (kubeclient.Options.AdaptiveRate).
	KubeAPIRateSet bool
	// Positional are stray words on the command line, accepted and warned about (WarnPositional), as upstream
	// ignores them (see Parsed).
	Positional []string

	HTTPEndpoint   string
	MetricsAddress string
	MetricsPath    string

	Timeout            time.Duration
	WorkerThreads      int
	RetryIntervalStart time.Duration
	RetryIntervalMax   time.Duration

	Automaxprocs bool

	// FeatureGates is filled by --feature-gates. A sidecar adds its own gates before parsing.
	FeatureGates featuregate.MutableVersionedFeatureGate
	// Logging is filled by -v, --vmodule, --logging-format and the other component-base logging flags.
	Logging *logsapi.LoggingConfiguration

	// without is Defaults.Without as a set.
	without map[string]bool
	// serverGates are the API server's gates, accepted on --feature-gates as upstream accepts them (see
	// addServerGates) and acted on by nothing.
	serverGates []Gate
}

// serverGateNoEffect is why the API server's gates change nothing here.
const serverGateNoEffect = "an API server feature gate: upstream's sidecars accept it because they register their gates in " +
	"k8s.io/apiserver's registry, but it changes nothing in a client"

// addServerGates adds the API server's feature gates (WatchList, APIResponseCompression, ...) that the gate
// does not know yet. Upstream's sidecars and snapshot-controller register their own gates in k8s.io/apiserver's
// DefaultMutableFeatureGate, which holds these too, so their --feature-gates accepts them, and manifests carry
// them (WatchList=false was a common workaround): Stowage's binaries must start with those manifests. Each
// keeps its maturity, default and lock (a GA gate locked to its default is refused away from it, as upstream);
// one set away from its default gets a warning at start-up (IgnoredGates).
func (c *Common) addServerGates() error {
	known := c.FeatureGates.GetAll()
	specs := map[featuregate.Feature]featuregate.FeatureSpec{}
	for name, spec := range utilfeature.DefaultMutableFeatureGate.GetAll() {
		if _, ok := known[name]; ok {
			continue
		}
		specs[name] = spec
		c.serverGates = append(c.serverGates, Gate{Name: name, Spec: spec, NoEffect: serverGateNoEffect})
	}
	if err := c.FeatureGates.Add(specs); err != nil {
		return fmt.Errorf("adding the API server's feature gates: %w", err)
	}
	return nil
}

// Register adds the shared flags to fs and returns the struct they fill when fs is parsed.
// It fails only if a feature gate cannot be registered, which would be a programming error.
func Register(fs *flag.FlagSet, d Defaults) (*Common, error) {
	c := &Common{
		LeaderElectionLabels: Labels{},
		FeatureGates:         featuregate.NewFeatureGate(),
		Logging:              logsapi.NewLoggingConfiguration(),
		without:              map[string]bool{},
	}
	for _, name := range d.Without {
		c.without[name] = true
	}
	if err := logsapi.AddFeatureGates(c.FeatureGates); err != nil {
		return nil, fmt.Errorf("adding logging feature gates: %w", err)
	}
	// NewFeatureGate already knows AllAlpha and AllBeta, as upstream's gate does.
	specs := map[featuregate.Feature]featuregate.FeatureSpec{
		ReleaseLeaderElectionOnExit: {Default: true, PreRelease: featuregate.Beta},
	}
	for _, g := range d.Gates {
		if _, dup := specs[g.Name]; dup {
			return nil, fmt.Errorf("feature gate %s registered twice", g.Name)
		}
		specs[g.Name] = g.Spec
	}
	if err := c.FeatureGates.Add(specs); err != nil {
		return nil, fmt.Errorf("adding feature gates: %w", err)
	}
	if err := c.addServerGates(); err != nil {
		return nil, err
	}

	all := flag.NewFlagSet("", flag.ContinueOnError)
	c.register(all, d)
	all.VisitAll(func(f *flag.Flag) {
		if !c.without[f.Name] {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	return c, nil
}

// register adds every shared flag to fs.
func (c *Common) register(fs *flag.FlagSet, d Defaults) {
	fs.BoolVar(&c.ShowVersion, "version", false, "Show version.")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "Absolute path to the kubeconfig file. Required only when running out of cluster.")
	fs.StringVar(&c.CSIAddress, "csi-address", DefaultCSIAddress, "Address of the CSI driver socket.")

	fs.BoolVar(&c.LeaderElection, "leader-election", false, "Enable leader election.")
	fs.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace where the leader election resource lives. Defaults to the pod namespace ($POD_NAMESPACE, then the service account namespace, then \"default\").")
	fs.DurationVar(&c.LeaderElectionLeaseDuration, "leader-election-lease-duration", DefaultLeaseDuration, "Duration that non-leader candidates will wait to force acquire leadership.")
	fs.DurationVar(&c.LeaderElectionRenewDeadline, "leader-election-renew-deadline", DefaultRenewDeadline, "Duration that the acting leader will retry refreshing leadership before giving up.")
	fs.DurationVar(&c.LeaderElectionRetryPeriod, "leader-election-retry-period", DefaultRetryPeriod, "Duration the leader election clients should wait between tries of actions.")
	fs.Var(&c.LeaderElectionLabels, "leader-election-labels", "Labels to add to the lease when this replica becomes leader, as a comma separated list of key:value pairs, e.g. 'my-label:my-value,other:value'.")

	fs.Float64Var(&c.KubeAPIQPS, "kube-api-qps", DefaultKubeAPIQPS, "QPS to use while communicating with the Kubernetes API server. When neither this nor --kube-api-burst is given, Stowage runs without a client-side limit against an API server with API Priority and Fairness, and with 20 (upstream: 5) otherwise.")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", DefaultKubeAPIBurst, "Burst to use while communicating with the Kubernetes API server. Stowage's default is 100 (upstream: 10); see --kube-api-qps.")

	fs.StringVar(&c.HTTPEndpoint, "http-endpoint", "", "The TCP network address where the HTTP server for diagnostics, including metrics and the leader election health check, will listen (example: `:8080`). Empty disables the server. Only one of --metrics-address and --http-endpoint can be set.")
	fs.StringVar(&c.MetricsAddress, "metrics-address", "", "(deprecated) The TCP network address where the Prometheus metrics endpoint will listen (example: `:8080`). Empty disables it. Only one of --metrics-address and --http-endpoint can be set.")
	fs.StringVar(&c.MetricsPath, "metrics-path", DefaultMetricsPath, "The HTTP path where Prometheus metrics will be exposed.")

	fs.DurationVar(&c.Timeout, "timeout", d.Timeout, "Timeout for waiting for each CSI call.")
	fs.IntVar(&c.WorkerThreads, "worker-threads", d.WorkerThreads, "Number of worker threads per work queue.")
	fs.DurationVar(&c.RetryIntervalStart, "retry-interval-start", DefaultRetryIntervalStart, "Initial retry interval of a failed operation. It doubles with each failure, up to --retry-interval-max.")
	fs.DurationVar(&c.RetryIntervalMax, "retry-interval-max", DefaultRetryIntervalMax, "Maximum retry interval of a failed operation.")

	fs.BoolVar(&c.Automaxprocs, "automaxprocs", false, "Set GOMAXPROCS from the container's CPU quota.")
	fs.Var(featureGatesValue{c.FeatureGates}, "feature-gates", "A set of key=value pairs that describe feature gates for alpha/experimental features. Options are:\n"+strings.Join(c.FeatureGates.KnownFeatures(), "\n"))

	logsapi.AddGoFlags(c.Logging, fs)
}

// IgnoredGates returns the gates of gates that Stowage does not act on and that are set away from their default
// (directly or through AllAlpha/AllBeta), each with the reason, for a start-up warning.
func (c *Common) IgnoredGates(gates []Gate) map[string]string {
	out := map[string]string{}
	for _, g := range slices.Concat(gates, c.serverGates) {
		if g.NoEffect != "" && c.FeatureGates.Enabled(g.Name) != g.Spec.Default {
			out[fmt.Sprintf("%s=%t", g.Name, !g.Spec.Default)] = g.NoEffect
		}
	}
	return out
}

// Endpoint returns the address of the diagnostics HTTP server: --http-endpoint, or the deprecated
// --metrics-address. Empty means no server.
func (c *Common) Endpoint() string {
	if c.HTTPEndpoint != "" {
		return c.HTTPEndpoint
	}
	return c.MetricsAddress
}

// Validate checks the parsed values; each error names the flag at fault.
func (c *Common) Validate() error {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }

	if c.HTTPEndpoint != "" && c.MetricsAddress != "" {
		add("only one of --metrics-address and --http-endpoint can be set")
	}
	if !c.without["csi-address"] && c.CSIAddress == "" {
		add("--csi-address must not be empty")
	}
	if !strings.HasPrefix(c.MetricsPath, "/") {
		add("--metrics-path %q must start with /", c.MetricsPath)
	}
	positive := []struct {
		name string
		d    time.Duration
	}{
		{"--leader-election-lease-duration", c.LeaderElectionLeaseDuration},
		{"--leader-election-renew-deadline", c.LeaderElectionRenewDeadline},
		{"--leader-election-retry-period", c.LeaderElectionRetryPeriod},
		{"--timeout", c.Timeout},
		{"--retry-interval-start", c.RetryIntervalStart},
		{"--retry-interval-max", c.RetryIntervalMax},
	}
	for _, p := range positive {
		if p.d <= 0 && !c.without[strings.TrimPrefix(p.name, "--")] {
			add("%s must be positive, got %s", p.name, p.d)
		}
	}
	if c.LeaderElectionRenewDeadline >= c.LeaderElectionLeaseDuration {
		add("--leader-election-renew-deadline (%s) must be less than --leader-election-lease-duration (%s)",
			c.LeaderElectionRenewDeadline, c.LeaderElectionLeaseDuration)
	}
	// client-go's leader elector jitters the retry period by up to 1.2x and refuses a renew deadline below that.
	if float64(c.LeaderElectionRenewDeadline) <= 1.2*float64(c.LeaderElectionRetryPeriod) {
		add("--leader-election-renew-deadline (%s) must be greater than 1.2 x --leader-election-retry-period (%s)",
			c.LeaderElectionRenewDeadline, c.LeaderElectionRetryPeriod)
	}
	if c.RetryIntervalStart > c.RetryIntervalMax {
		add("--retry-interval-start (%s) must not exceed --retry-interval-max (%s)", c.RetryIntervalStart, c.RetryIntervalMax)
	}
	if c.WorkerThreads < 1 {
		add("--worker-threads must be at least 1, got %d", c.WorkerThreads)
	}
	if math.IsNaN(c.KubeAPIQPS) || math.IsInf(c.KubeAPIQPS, 0) {
		add("--kube-api-qps must be a finite number, got %v", c.KubeAPIQPS)
	}
	// A positive QPS with burst 0 makes client-go's token bucket refuse every request.
	if c.KubeAPIQPS > 0 && c.KubeAPIBurst < 1 {
		add("--kube-api-burst must be at least 1 when --kube-api-qps is positive, got %d", c.KubeAPIBurst)
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid flags: %s", strings.Join(errs, "; "))
	}
	return nil
}

// featureGatesValue adapts a feature gate to flag.Value for --feature-gates=A=true,B=false.
type featureGatesValue struct {
	gate featuregate.MutableFeatureGate
}

func (v featureGatesValue) String() string {
	if s, ok := v.gate.(fmt.Stringer); ok && v.gate != nil {
		return s.String()
	}
	return ""
}

func (v featureGatesValue) Set(value string) error {
	return v.gate.Set(value)
}

// Parsed records what only the parsed command line can tell: whether the client rate flags were given, and
// the positional arguments ParseInterspersed kept. Call it after parsing.
func (c *Common) Parsed(fs *flag.FlagSet) {
	c.KubeAPIRateSet = RateFlagsSet(fs)
	c.Positional = fs.Args()
}

// RateFlagsSet reports whether the command line parsed by fs gave --kube-api-qps or --kube-api-burst.
func RateFlagsSet(fs *flag.FlagSet) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "kube-api-qps" || f.Name == "kube-api-burst" {
			set = true
		}
	})
	return set
}
