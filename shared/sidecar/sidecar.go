// Package sidecar is the start-up skeleton every Stowage CSI sidecar's main calls. Run parses and validates
// the standard flags, sets up logging, feature gates and GOMAXPROCS, builds the Kubernetes clients, connects
// to the CSI driver and waits until it is ready, learns its name and capabilities, serves metrics and health
// on --http-endpoint, lets the sidecar check the driver and add HTTP handlers on every replica (Prepare), and
// runs the sidecar's controllers under leader election. On SIGTERM the controllers'
// context is cancelled; Run waits for them to drain and then releases the lease, so a standby takes over at
// once.
//
// A sidecar's main hands its options and its run function to Main, which adds signal handling and the exit
// code:
//
//	func main() {
//		var cfg attacher.Config // the sidecar's own flags
//		sidecar.Main(sidecar.Options{
//			Binary:     "csi-attacher",
//			Defaults:   flags.Defaults{Timeout: 15 * time.Second, WorkerThreads: 10},
//			LockPrefix: "external-attacher-leader-",
//			Args:       os.Args[1:],
//			AddFlags:   cfg.AddFlags,
//		}, func(ctx context.Context, env *sidecar.Env) error {
//			return attacher.Run(ctx, env, cfg)
//		})
//	}
//
// A sidecar with upstream's --master registers it in AddFlags and returns its value from Options.Master. A
// sidecar that refuses some drivers, or serves more than metrics and health (pprof), does so in
// Options.Prepare: it runs on standbys too, so they fail fast and answer on the same endpoints as the leader.
//
// Inside run, queues come from workqueue.New[T](env.Queues, env.QueueConfig("csi-attacher-va")) and are
// driven by workqueue.Run(ctx, env.Flags.WorkerThreads, q, handler); both stop taking work when ctx ends and
// return once in-flight items are done, which is when Run releases the lease.
package sidecar

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/automaxprocs/maxprocs"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/events"
	"github.com/stowage-csi/stowage/shared/flags"
	"github.com/stowage-csi/stowage/shared/httpserver"
	"github.com/stowage-csi/stowage/shared/kubeclient"
	"github.com/stowage-csi/stowage/shared/leaderelection"
	"github.com/stowage-csi/stowage/shared/metrics"
	"github.com/stowage-csi/stowage/shared/process"
	"github.com/stowage-csi/stowage/shared/signals"
	"github.com/stowage-csi/stowage/shared/version"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

// Options describe the sidecar to Run.
type Options struct {
	// Binary is the program name: flag set name, --version output, user agent and, unless EventSource says
	// otherwise, Event source.
	Binary string
	// Defaults are the sidecar's --timeout and --worker-threads defaults and its own feature gates.
	Defaults flags.Defaults
	// LockPrefix is prepended to the driver name to form the Lease name (see leaderelection.LockName).
	LockPrefix string
	// Args are the command-line arguments without the program name.
	Args []string
	// AddFlags registers the sidecar's own flags before parsing (its feature gates go in Defaults.Gates).
	// Optional.
	AddFlags func(fs *flag.FlagSet, common *flags.Common)
	// Validate checks the sidecar's own flags after parsing. Optional.
	Validate func() error
	// Master returns the API server URL for kubeclient.Options.Master, read once the flags are parsed: a
	// sidecar with upstream's --master registers that flag in AddFlags and returns its value here. Optional;
	// nil or "" means --kubeconfig or the in-cluster configuration alone.
	Master func() string
	// Prepare is called on every replica once the driver is ready and its name and capabilities are in env
	// (Events too), before the replica joins the leader election. An error stops start-up and is Run's
	// result, so a sidecar refuses a driver it cannot serve on standbys as well as on the leader. Handlers
	// added to env.HTTP here are served on standbys too. Optional.
	Prepare func(ctx context.Context, env *Env) error
	// Migration adds upstream's "migrated" label to csi_sidecar_operations_seconds when the driver replaces an
	// in-tree plugin (callmetrics.go), for the sidecars that serve CSI-migrated volumes (attacher, provisioner,
	// resizer). The label's value comes from the call's context (csi-lib-utils
	// connection.AdditionalInfo{Migrated: "true"}), "false" otherwise.
	Migration bool
	// CountScrapes serves promhttp_metric_handler_requests_total and _in_flight, as upstream's provisioner
	// does (it wraps its handler in promhttp's instrumentation; the other sidecars do not).
	CountScrapes bool
	// EventScheme knows the types Events are recorded on; nil means client-go's built-in types.
	EventScheme *runtime.Scheme
	// EventSource returns the source component of the Events env.Events records, given the driver's name; Run
	// calls it once the driver is known. Nil means Binary, the source of upstream's attacher, resizer and
	// snapshotter Events; upstream's provisioner names its Events' source "<driver>_<hostname>" instead.
	EventSource func(driverName string) string
	// EventsOwnClient sends env.Events' Events through a clientset of their own, with the same QPS and burst as
	// the main client but a rate limiter of its own, so a burst of Events never delays the controllers' writes,
	// nor the reverse. False sends them through env.Clients.Kube.
	EventsOwnClient bool
	// NoEffect names the flags the sidecar accepts for compatibility with upstream but does not act on, each with
	// the reason; Run warns about each one the command line sets. Optional.
	NoEffect map[string]string
	// Stdout receives --version and --help output, and a validate-only run's verdict; nil means os.Stdout.
	Stdout io.Writer
	// OnConnectionLoss and OnLeaseLost replace the default exits, for tests. Nil keeps upstream's behaviour:
	// exit 1 when the CSI socket goes away or the lease is lost.
	OnConnectionLoss func(context.Context) bool
	OnLeaseLost      func()
}

// Env is what a sidecar's controllers get from Run.
type Env struct {
	Binary string
	Flags  *flags.Common
	// Clients are the main (protobuf) and leader election clientsets; build CRD clients from
	// kubeclient.ForCRDs(Clients.Config).
	Clients *kubeclient.Clients
	// CSI is the driver connection; every call through it is measured and should be bounded by
	// CSI.WithTimeout.
	CSI            *csiconn.Conn
	DriverName     string
	PluginCaps     csiconn.PluginCapabilities
	ControllerCaps csiconn.ControllerCapabilities
	// Metrics is the process registry served at --metrics-path; register the sidecar's own metrics here.
	Metrics *metrics.Registry
	// Queues names and measures work queues: workqueue.New[T](env.Queues, env.QueueConfig(name)).
	Queues *workqueue.Metrics
	// Events records Kubernetes Events, with Binary (or Options.EventSource) as the source.
	Events *events.Recorder
	// HTTP is the diagnostics server, nil without --http-endpoint/--metrics-address.
	HTTP *httpserver.Server
}

// QueueConfig returns a queue configuration with the --retry-interval-start/max backoff.
func (e *Env) QueueConfig(name string) workqueue.Config {
	return workqueue.Config{Name: name, RetryIntervalStart: e.Flags.RetryIntervalStart, RetryIntervalMax: e.Flags.RetryIntervalMax}
}

// Main runs the sidecar as a process: Run, with the first SIGINT or SIGTERM as a graceful shutdown (a second one
// exits at once), then exit status 1, with the error logged, if Run failed.
func Main(o Options, run func(context.Context, *Env) error) {
	ctx, stop := signals.Context(context.Background(), nil)
	err := Run(ctx, o, run)
	stop()
	if err != nil {
		klog.ErrorS(err, "Sidecar failed", "binary", o.Binary)
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

// Run starts the sidecar and calls run under leader election; see the package documentation. It returns nil
// after --version or --help, after a validate-only run (process.ValidateOnlyEnv) found the configuration
// valid, and after a graceful shutdown.
func Run(ctx context.Context, o Options, run func(context.Context, *Env) error) (err error) {
	fs, common, err := parseFlags(o)
	if err != nil || fs == nil {
		return err
	}
	undo, err := setUpProcess(ctx, o, fs, common)
	if err != nil {
		return err
	}
	defer undo()
	// The flags, the sidecar's own checks and the logging configuration have passed: a validate-only run ends
	// here, before the Kubernetes client configuration (in-cluster, only a Pod has it), the driver and the
	// Prepare checks, which need the network.
	if done, err := process.EndIfValidateOnly(os.Getenv, stdout(o), o.Binary); err != nil || done {
		return err
	}
	env, err := newEnv(ctx, o, common)
	if err != nil {
		return err
	}
	stopServing, err := serveHTTP(ctx, env)
	if err != nil {
		return err
	}
	defer stopServing()
	csiMetrics, err := connect(ctx, o, env)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := env.CSI.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("closing the CSI connection: %w", cerr)
		}
	}()
	if err := discover(ctx, env, csiMetrics); err != nil {
		if ctx.Err() != nil {
			// SIGTERM while waiting for the driver is a normal shutdown, not a failure.
			klog.FromContext(ctx).Info("Shutting down before the CSI driver was ready")
			return nil
		}
		return err
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("driver", env.DriverName))

	// Events keep flowing while work drains; they stop when Run returns.
	eventsCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEvents()
	if env.Events, err = newRecorder(eventsCtx, o, env); err != nil {
		return err
	}
	defer env.Events.Shutdown()

	if o.Prepare != nil {
		if err := o.Prepare(ctx, env); err != nil {
			return err
		}
	}
	return elect(ctx, o, env, run)
}

// parseFlags parses and validates o.Args. A nil flag set with a nil error means Run is done: --version or
// --help printed what was asked.
func parseFlags(o Options) (*flag.FlagSet, *flags.Common, error) {
	out := stdout(o)
	fs, common, err := NewFlagSet(o)
	if err != nil {
		return nil, nil, err
	}
	fs.SetOutput(out)
	if err := flags.ParseInterspersed(fs, o.Args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	common.Parsed(fs)
	if common.ShowVersion {
		return nil, nil, version.Print(out, o.Binary)
	}
	if err := common.Validate(); err != nil {
		return nil, nil, err
	}
	if o.Validate != nil {
		if err := o.Validate(); err != nil {
			return nil, nil, fmt.Errorf("invalid flags: %w", err)
		}
	}
	return fs, common, nil
}

// stdout is o.Stdout, or os.Stdout when unset.
func stdout(o Options) io.Writer {
	if o.Stdout == nil {
		return os.Stdout
	}
	return o.Stdout
}

// setUpProcess applies the logging flags and GOMAXPROCS, and warns about the flags that are set but do
// nothing. The returned function undoes GOMAXPROCS.
func setUpProcess(ctx context.Context, o Options, fs *flag.FlagSet, common *flags.Common) (func(), error) {
	if err := logsapi.ValidateAndApply(common.Logging, common.FeatureGates); err != nil {
		return nil, fmt.Errorf("setting up logging: %w", err)
	}
	logger := klog.FromContext(ctx)
	logger.Info("Starting", "binary", o.Binary, "version", version.Version)
	undo := func() {}
	if common.Automaxprocs {
		set, err := maxprocs.Set(maxprocs.Logger(func(format string, args ...any) { logger.Info(fmt.Sprintf(format, args...)) }))
		if err != nil {
			logger.Error(err, "Setting GOMAXPROCS from the CPU quota failed; keeping the default")
		}
		if set != nil {
			undo = set
		}
	}
	if common.MetricsAddress != "" {
		logger.Info("--metrics-address is deprecated, use --http-endpoint")
	}
	flags.WarnPositional(logger, common.Positional)
	warnNoEffect(logger, fs, o.NoEffect)
	warnIgnoredGates(logger, common, o.Defaults.Gates)
	return undo, nil
}

// warnIgnoredGates logs a warning for each of the sidecar's gates that Stowage accepts but does not act on and
// that the command line set away from its default, for the same reason as warnNoEffect.
func warnIgnoredGates(logger klog.Logger, common *flags.Common, gates []flags.Gate) {
	ignored := common.IgnoredGates(gates)
	for _, gate := range slices.Sorted(maps.Keys(ignored)) {
		logger.Info("Warning: feature gate has no effect in Stowage and is ignored", "featureGate", gate, "reason", ignored[gate])
	}
}

// warnNoEffect logs a warning for each flag of noEffect that the command line sets: it is accepted so that a
// Deployment written for the upstream sidecar starts, but whoever set it expects something that does not happen.
func warnNoEffect(logger klog.Logger, fs *flag.FlagSet, noEffect map[string]string) {
	fs.Visit(func(f *flag.Flag) {
		if why, ok := noEffect[f.Name]; ok {
			logger.Info("Warning: flag has no effect in Stowage and is ignored", "flag", "--"+f.Name, "value", f.Value.String(), "reason", why)
		}
	})
}

// newEnv builds the metrics registry, the queue metrics and the Kubernetes clients.
func newEnv(ctx context.Context, o Options, common *flags.Common) (*Env, error) {
	env := &Env{Binary: o.Binary, Flags: common, Metrics: metrics.NewSidecarRegistry(o.CountScrapes)}
	var err error
	if env.Queues, err = workqueue.NewMetrics(env.Metrics.Registerer()); err != nil {
		return nil, err
	}
	clientOpts := kubeclient.Options{Kubeconfig: common.Kubeconfig, QPS: float32(common.KubeAPIQPS),
		Burst: common.KubeAPIBurst, AdaptiveRate: !common.KubeAPIRateSet, UserAgent: version.UserAgent(o.Binary)}
	if o.Master != nil {
		clientOpts.Master = o.Master()
	}
	if env.Clients, err = kubeclient.New(ctx, clientOpts); err != nil {
		return nil, err
	}
	if err := kubeclient.RegisterRateLimit(env.Metrics.Registerer(), env.Clients.RateLimit); err != nil {
		return nil, err
	}
	return env, nil
}

// serveHTTP starts the diagnostics server on --http-endpoint, if set, with the metrics on it. It outlives ctx,
// answering while work drains, until the returned function stops it and waits for it.
func serveHTTP(ctx context.Context, env *Env) (func(), error) {
	endpoint := env.Flags.Endpoint()
	if endpoint == "" {
		return func() {}, nil
	}
	var err error
	if env.HTTP, err = httpserver.Listen(endpoint); err != nil {
		return nil, err
	}
	env.HTTP.Handle(env.Flags.MetricsPath, env.Metrics.Handler())
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	var serving sync.WaitGroup
	serving.Go(func() {
		if err := env.HTTP.Serve(serveCtx); err != nil {
			klog.FromContext(ctx).Error(err, "HTTP endpoint failed")
		}
	})
	return func() {
		stopServing()
		serving.Wait()
	}, nil
}

// connect dials the driver into env.CSI, with every call measured in csi_sidecar_operations_seconds.
func connect(ctx context.Context, o Options, env *Env) (*callMetrics, error) {
	csiMetrics := newCallMetrics(env.Metrics, o.Migration)
	var err error
	env.CSI, err = csiconn.Connect(ctx, csiconn.Options{Address: env.Flags.CSIAddress, Timeout: env.Flags.Timeout,
		Metrics: csiMetrics, OnConnectionLoss: o.OnConnectionLoss})
	return csiMetrics, err
}

// elect runs run under leader election on the driver's Lease, serving the election's health check.
func elect(ctx context.Context, o Options, env *Env, run func(context.Context, *Env) error) error {
	common := env.Flags
	elector, err := leaderelection.New(leaderelection.Config{
		Enabled:       common.LeaderElection,
		Client:        env.Clients.LeaderElection,
		LockName:      leaderelection.LockName(o.LockPrefix, env.DriverName),
		Namespace:     leaderelection.ResolveNamespace(common.LeaderElectionNamespace, leaderelection.ServiceAccountNamespaceFile),
		Labels:        common.LeaderElectionLabels,
		LeaseDuration: common.LeaderElectionLeaseDuration,
		RenewDeadline: common.LeaderElectionRenewDeadline,
		RetryPeriod:   common.LeaderElectionRetryPeriod,
		ReleaseOnExit: common.FeatureGates.Enabled(flags.ReleaseLeaderElectionOnExit),
		Registerer:    env.Metrics.Registerer(),
		OnLost:        o.OnLeaseLost,
	})
	if err != nil {
		return err
	}
	if env.HTTP != nil && common.LeaderElection {
		env.HTTP.HandleCheck(leaderelection.HealthzPath, elector.Check)
	}
	return elector.Run(ctx, func(ctx context.Context) error { return run(ctx, env) })
}

// NewFlagSet returns the flag set Run parses: the standard flags with o.Defaults, then o.AddFlags. Sidecars'
// tests use it to check the flags and defaults their binary has.
func NewFlagSet(o Options) (*flag.FlagSet, *flags.Common, error) {
	fs := flag.NewFlagSet(o.Binary, flag.ContinueOnError)
	common, err := flags.Register(fs, o.Defaults)
	if err != nil {
		return nil, nil, err
	}
	if o.AddFlags != nil {
		o.AddFlags(fs, common)
	}
	return fs, common, nil
}

// newRecorder builds env.Events with the source and client o asks for.
func newRecorder(ctx context.Context, o Options, env *Env) (*events.Recorder, error) {
	source := o.Binary
	if o.EventSource != nil {
		source = o.EventSource(env.DriverName)
	}
	client, err := eventClient(o, env.Clients)
	if err != nil {
		return nil, err
	}
	return events.New(ctx, client, events.Options{Component: source, Scheme: o.EventScheme})
}

// eventClient is the main clientset, or with o.EventsOwnClient a new one from the same configuration (so the
// same QPS and burst) with a rate limiter of its own.
func eventClient(o Options, clients *kubeclient.Clients) (kubernetes.Interface, error) {
	if !o.EventsOwnClient {
		return clients.Kube, nil
	}
	client, err := kubernetes.NewForConfig(kubeclient.ForCore(clients.Config))
	if err != nil {
		return nil, fmt.Errorf("creating the Event client: %w", err)
	}
	return client, nil
}

// discover waits for the driver and reads what it is, as every upstream sidecar does at start-up.
func discover(ctx context.Context, env *Env, csiMetrics *callMetrics) error {
	if err := env.CSI.ProbeUntilReady(ctx); err != nil {
		return err
	}
	name, err := env.CSI.DriverName(ctx)
	if err != nil {
		return err
	}
	env.DriverName = name
	csiMetrics.driverKnown(name)
	if env.PluginCaps, err = env.CSI.PluginCapabilities(ctx); err != nil {
		return err
	}
	env.ControllerCaps = csiconn.ControllerCapabilities{}
	// A node-only driver need not implement ControllerGetCapabilities.
	if env.PluginCaps.Has(csi.PluginCapability_Service_CONTROLLER_SERVICE) {
		if env.ControllerCaps, err = env.CSI.ControllerCapabilities(ctx); err != nil {
			return err
		}
	}
	klog.FromContext(ctx).Info("CSI driver is ready", "driver", name)
	return nil
}
