// Package leaderelection runs a sidecar's work under leader election on a Lease, like upstream's csi-lib-utils
// wrapper (own clientset, 15/10/5 s, exit on a lost lease, /healthz/leader-election), with two differences that
// matter in practice. On graceful exit (SIGTERM, context cancelled) the leader stops taking work, lets the work
// in flight finish while still holding the Lease, and then releases it. And a standby watches the Lease instead
// of polling it, taking it as soon as the holder's last renewal has expired (standby.go), so a standby takes
// over at once after a release and about one lease duration after a leader's last renewal when it died.
package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

const (
	// HealthzPath is where the leader election health check is served.
	HealthzPath = "/healthz/leader-election"
	// HealthCheckTimeout is how long past a missed renewal the leader still reports healthy (upstream's 20 s).
	HealthCheckTimeout = 20 * time.Second
)

// ErrLeaseLost is returned by Run when the Lease was lost while the work was running and OnLost returned.
var ErrLeaseLost = errors.New("leader election lease lost")

// Config configures an Elector.
type Config struct {
	// Enabled is --leader-election. When false, Run just runs the function and the health check is always OK.
	Enabled bool
	// Client must be a clientset of its own, so a busy, throttled main client cannot starve lease renewals.
	Client kubernetes.Interface
	// LockName is the Lease name, usually LockName(prefix, driver).
	LockName string
	// Namespace of the Lease, usually ResolveNamespace(--leader-election-namespace, ServiceAccountNamespaceFile).
	Namespace string
	// Identity of this candidate; empty means DefaultIdentity().
	Identity string
	// Labels are put on the Lease when this candidate becomes leader (--leader-election-labels).
	Labels map[string]string

	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration

	// ReleaseOnExit releases the Lease after the work has drained on graceful exit.
	ReleaseOnExit bool
	// Registerer receives leader_election_master_status{name} and leader_election_slowpath_total{name} (see
	// slowpath.go for why the latter is one counter per process); nil registers nothing.
	Registerer prometheus.Registerer
	// MetricName is the name label of those two metrics. Upstream's sidecars leave their elector unnamed, so
	// they report name="" whatever the Lease; the sidecars leave this empty too, so dashboards and alerts that
	// match on name="" keep working. Tests that run several Electors in one process name them apart.
	MetricName string
	// EventRecorder, if set, records leadership events on the Lease.
	EventRecorder resourcelock.EventRecorder
	// OnLost runs when the Lease is lost without a graceful exit. Nil means upstream's behaviour: flush logs and
	// exit 1, so the container restarts as a standby. Tests replace it.
	OnLost func()
	// Clock times a standby's takeover and stamps the Lease it takes; nil is the real clock. Tests replace it.
	Clock clock.WithTicker
}

// Elector runs work under leader election.
type Elector struct {
	cfg     Config
	lock    resourcelock.Interface
	healthz *leaderelection.HealthzAdaptor
	status  prometheus.Gauge
	// handoff is set while client-go's elector has yet to renew a Lease the standby took: that first renewal
	// takes client-go's slow path by construction, and is not counted as one (see slowpath.go).
	handoff atomic.Bool
	// hooks follow the standby; tests only.
	hooks standbyHooks
}

// New validates cfg and prepares the Lease lock; nothing talks to the API server until Run.
func New(cfg Config) (*Elector, error) {
	e := &Elector{cfg: cfg, healthz: leaderelection.NewLeaderHealthzAdaptor(HealthCheckTimeout)}
	if !cfg.Enabled {
		return e, nil
	}
	if cfg.Client == nil {
		return nil, errors.New("leader election needs a Kubernetes client")
	}
	if cfg.LockName == "" || cfg.Namespace == "" {
		return nil, fmt.Errorf("leader election needs a lease name and namespace, got %q in %q", cfg.LockName, cfg.Namespace)
	}
	if e.cfg.Identity == "" {
		id, err := DefaultIdentity()
		if err != nil {
			return nil, err
		}
		e.cfg.Identity = id
	}
	if e.cfg.Clock == nil {
		e.cfg.Clock = clock.RealClock{}
	}
	if e.cfg.OnLost == nil {
		e.cfg.OnLost = func() { klog.FlushAndExit(klog.ExitFlushTimeout, 1) }
	}
	lock, err := resourcelock.NewWithLabels(resourcelock.LeasesResourceLock, cfg.Namespace, cfg.LockName,
		cfg.Client.CoreV1(), cfg.Client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: e.cfg.Identity, EventRecorder: cfg.EventRecorder}, cfg.Labels)
	if err != nil {
		return nil, fmt.Errorf("creating the lease lock %s/%s: %w", cfg.Namespace, cfg.LockName, err)
	}
	e.lock = lock
	status, err := masterStatus(cfg.Registerer, cfg.MetricName)
	if err != nil {
		return nil, err
	}
	e.status = status
	if err := registerSlowpath(cfg.Registerer, cfg.MetricName); err != nil {
		return nil, err
	}
	return e, nil
}

// masterStatus registers leader_election_master_status (the name client-go's leader election metrics use) in
// reg, reusing the family if another elector registered it already.
func masterStatus(reg prometheus.Registerer, name string) (prometheus.Gauge, error) {
	vec := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leader_election_master_status",
		Help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
	}, []string{"name"})
	if reg != nil {
		if err := reg.Register(vec); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return nil, fmt.Errorf("registering leader_election_master_status: %w", err)
			}
			existing, ok := already.ExistingCollector.(*prometheus.GaugeVec)
			if !ok {
				return nil, fmt.Errorf("leader_election_master_status is registered with an unexpected type %T", already.ExistingCollector)
			}
			vec = existing
		}
	}
	g := vec.WithLabelValues(name)
	g.Set(0)
	return g, nil
}

// Identity is the candidate's identity, as written to the Lease's holderIdentity.
func (e *Elector) Identity() string { return e.cfg.Identity }

// Check is the /healthz/leader-election check: an error only if this candidate leads and has failed to renew
// the Lease for longer than the lease duration plus HealthCheckTimeout.
func (e *Elector) Check(r *http.Request) error { return e.healthz.Check(r) }

// Run runs work once this candidate leads, and returns after work has returned.
//
// work's context is cancelled when ctx is (graceful exit) or when the Lease is lost. On graceful exit the
// Lease is renewed until work returns and then, with ReleaseOnExit, released. If work returns on its own, the
// Lease is released too and Run returns work's error. If the Lease is lost, OnLost runs (by default exiting
// the process); if it returns, Run returns ErrLeaseLost once work has stopped. If ctx ends before this
// candidate leads, Run returns nil without running work.
func (e *Elector) Run(ctx context.Context, work func(context.Context) error) error {
	if !e.cfg.Enabled {
		return work(ctx)
	}
	logger := klog.FromContext(ctx).WithValues("lease", e.cfg.Namespace+"/"+e.cfg.LockName, "identity", e.cfg.Identity)
	ctx = klog.NewContext(ctx, logger)

	// The elector outlives ctx: it keeps renewing while work drains, and stops only when told to.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	el := &election{e: e, ctx: ctx, logger: logger, work: work, stopElector: stopElector, workDone: make(chan struct{})}
	var watching sync.WaitGroup
	watching.Go(func() { el.stopUnlessLeading(electorCtx) })
	defer func() {
		stopElector()
		watching.Wait()
	}()

	le, err := e.newLeaderElector(logger, el.config())
	if err != nil {
		return err
	}
	e.healthz.SetLeaderElection(le)
	sb := &standby{cfg: &e.cfg, lock: e.lock, clock: e.cfg.Clock, hooks: e.hooks}
	if !sb.acquire(electorCtx) {
		return el.result()
	}
	// client-go's elector finds this candidate the holder and renews from here on.
	e.handoff.Store(true)
	le.Run(electorCtx)
	if !el.led() && e.cfg.ReleaseOnExit {
		// Stopped between the standby's takeover and client-go's first renewal: nobody else releases the Lease.
		releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.RenewDeadline)
		if err := sb.release(releaseCtx); err != nil {
			logger.Error(err, "Releasing the lease taken before leading failed; it expires on its own")
		}
		cancel()
	}
	return el.result()
}

// newLeaderElector makes client-go's elector, and says so when another metrics provider took its slow path count.
func (e *Elector) newLeaderElector(logger klog.Logger, lec leaderelection.LeaderElectionConfig) (*leaderelection.LeaderElector, error) {
	p := slowpath()
	p.creating.Lock()
	defer p.creating.Unlock()
	p.handoff.Store(&e.handoff)
	defer p.handoff.Store(nil)
	made := p.made.Load()
	le, err := leaderelection.NewLeaderElector(lec)
	if err != nil {
		return nil, fmt.Errorf("configuring leader election: %w", err)
	}
	if p.made.Load() == made {
		// client-go took no metric from our provider: another one was installed in this process first.
		logger.Info("leader_election_slowpath_total is not counted: another package set client-go's leader election metrics provider first")
	}
	return le, nil
}

// election is one Run: client-go's callbacks and Run's own goroutines share its state.
type election struct {
	e      *Elector
	ctx    context.Context // Run's: its end is a graceful exit
	logger klog.Logger
	work   func(context.Context) error
	// stopElector ends client-go's elector, which then releases the Lease if it holds it and ReleaseOnExit.
	stopElector context.CancelFunc
	workDone    chan struct{} // closed when work has returned

	mu sync.Mutex
	// acquired is set when this candidate writes itself into the Lease. client-go starts the work goroutine
	// only after that, so once it returns, acquired says whether work must be waited for.
	acquired bool
	stopping bool // a graceful stop is under way: losing leadership now is expected
	workErr  error
}

// config is client-go's configuration, with the callbacks that run work and tell a lost Lease from an exit.
func (el *election) config() leaderelection.LeaderElectionConfig {
	cfg := el.e.cfg
	return leaderelection.LeaderElectionConfig{
		Lock:            &trackingLock{Interface: el.e.lock, onHeld: el.held},
		Name:            cfg.MetricName, // client-go reports the slow path under this name
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: cfg.ReleaseOnExit,
		WatchDog:        el.e.healthz,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: el.lead,
			OnStoppedLeading: el.stoppedLeading,
			OnNewLeader: func(identity string) {
				el.logger.V(3).Info("New leader elected", "leader", identity)
			},
		},
	}
}

func (el *election) held() {
	el.e.handoff.Store(false)
	el.mu.Lock()
	el.acquired = true
	el.mu.Unlock()
}

// led says whether client-go's elector ever wrote this candidate into the Lease.
func (el *election) led() bool {
	el.mu.Lock()
	defer el.mu.Unlock()
	return el.acquired
}

// stopUnlessLeading waits for Run's context to end, marks the stop as graceful, and stops a candidate that does
// not lead; a leader's work sees ctx end, drains, and stops the elector itself (lead). It returns early when
// the elector stops for another reason.
func (el *election) stopUnlessLeading(electorCtx context.Context) {
	select {
	case <-el.ctx.Done():
	case <-electorCtx.Done():
		return
	}
	el.mu.Lock()
	el.stopping = true
	held := el.acquired
	el.mu.Unlock()
	if !held {
		el.stopElector()
	}
}

// lead runs work while this candidate leads, until Run's context ends or the Lease is lost, then stops the
// elector: only now, with work returned, may the Lease be released.
func (el *election) lead(leaderCtx context.Context) {
	el.e.status.Set(1)
	el.logger.Info("Became leader, starting work")

	workCtx, cancel := context.WithCancel(leaderCtx)
	stop := context.AfterFunc(el.ctx, cancel)
	err := el.work(workCtx)
	stop()
	cancel()

	el.mu.Lock()
	el.workErr = err
	if leaderCtx.Err() == nil {
		// Work ended while we still lead (graceful exit or its own return): not a lost lease.
		el.stopping = true
	}
	el.mu.Unlock()
	close(el.workDone)
	el.logger.Info("Work stopped, leaving leader election", "releaseLease", el.e.cfg.ReleaseOnExit, "err", err)
	el.stopElector()
}

func (el *election) stoppedLeading() {
	el.e.status.Set(0)
	el.mu.Lock()
	graceful := el.stopping
	el.mu.Unlock()
	if graceful {
		return
	}
	el.logger.Error(nil, "Lost the leader election lease")
	el.e.cfg.OnLost()
}

// result is Run's: nil if this candidate never led, otherwise once work has returned, its error, or
// ErrLeaseLost if the Lease was lost under it.
func (el *election) result() error {
	el.mu.Lock()
	held := el.acquired
	el.mu.Unlock()
	if !held {
		return nil
	}
	<-el.workDone
	el.mu.Lock()
	defer el.mu.Unlock()
	if !el.stopping {
		return ErrLeaseLost
	}
	return el.workErr
}

// trackingLock reports when a write made this candidate the Lease holder.
type trackingLock struct {
	resourcelock.Interface
	onHeld func()
}

func (l *trackingLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, r)
	if err == nil && r.HolderIdentity == l.Identity() {
		l.onHeld()
	}
	return err
}

func (l *trackingLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, r)
	if err == nil && r.HolderIdentity == l.Identity() {
		l.onHeld()
	}
	return err
}
