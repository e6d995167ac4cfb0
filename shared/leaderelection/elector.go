// Package leaderelection runs a sidecar's work under leader election on a Lease, like upstream's csi-lib-utils
// wrapper (own clientset, 15/10/5 s, exit on a lost lease, /healthz/leader-election), with one difference that
// matters in practice: on graceful exit (SIGTERM, context cancelled) the leader stops taking work, lets the work
// in flight finish while still holding the Lease, and then releases it, so a standby takes over in about one
// retry period instead of a full lease duration.
package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
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
	// EventRecorder, if set, records leadership events on the Lease.
	EventRecorder resourcelock.EventRecorder
	// OnLost runs when the Lease is lost without a graceful exit. Nil means upstream's behaviour: flush logs and
	// exit 1, so the container restarts as a standby. Tests replace it.
	OnLost func()
}

// Elector runs work under leader election.
type Elector struct {
	cfg     Config
	lock    resourcelock.Interface
	healthz *leaderelection.HealthzAdaptor
	status  prometheus.Gauge
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
	status, err := masterStatus(cfg.Registerer, cfg.LockName)
	if err != nil {
		return nil, err
	}
	e.status = status
	if err := registerSlowpath(cfg.Registerer, cfg.LockName); err != nil {
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
	defer stopElector()

	var (
		mu sync.Mutex
		// acquired is set when this candidate writes itself into the Lease. client-go starts the work
		// goroutine only after that, so once le.Run returns, acquired says whether work must be waited for.
		acquired bool
		stopping bool // a graceful stop is under way: losing leadership now is expected
		workErr  error
	)
	lock := &trackingLock{Interface: e.lock, onHeld: func() {
		mu.Lock()
		acquired = true
		mu.Unlock()
	}}
	workDone := make(chan struct{})

	go func() {
		select {
		case <-ctx.Done():
		case <-electorCtx.Done():
			return
		}
		mu.Lock()
		stopping = true
		held := acquired
		mu.Unlock()
		if !held {
			stopElector()
		}
		// A leader's work sees ctx end, drains, and stops the elector itself.
	}()

	lec := leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            e.cfg.LockName,
		LeaseDuration:   e.cfg.LeaseDuration,
		RenewDeadline:   e.cfg.RenewDeadline,
		RetryPeriod:     e.cfg.RetryPeriod,
		ReleaseOnCancel: e.cfg.ReleaseOnExit,
		WatchDog:        e.healthz,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				e.status.Set(1)
				logger.Info("Became leader, starting work")

				workCtx, cancel := context.WithCancel(leaderCtx)
				stop := context.AfterFunc(ctx, cancel)
				err := work(workCtx)
				stop()
				cancel()

				mu.Lock()
				workErr = err
				if leaderCtx.Err() == nil {
					// Work ended while we still lead (graceful exit or its own return): not a lost lease.
					stopping = true
				}
				mu.Unlock()
				close(workDone)
				logger.Info("Work stopped, leaving leader election", "releaseLease", e.cfg.ReleaseOnExit, "err", err)
				stopElector()
			},
			OnStoppedLeading: func() {
				e.status.Set(0)
				mu.Lock()
				graceful := stopping
				mu.Unlock()
				if graceful {
					return
				}
				logger.Error(nil, "Lost the leader election lease")
				e.cfg.OnLost()
			},
			OnNewLeader: func(identity string) {
				logger.V(3).Info("New leader elected", "leader", identity)
			},
		},
	}
	made := slowpath().made.Load()
	le, err := leaderelection.NewLeaderElector(lec)
	if err != nil {
		return fmt.Errorf("configuring leader election: %w", err)
	}
	if slowpath().made.Load() == made {
		// client-go took no metric from our provider: another one was installed in this process first.
		logger.Info("leader_election_slowpath_total is not counted: another package set client-go's leader election metrics provider first")
	}
	e.healthz.SetLeaderElection(le)
	logger.Info("Waiting to become leader")
	le.Run(electorCtx)

	mu.Lock()
	held := acquired
	mu.Unlock()
	if !held {
		return nil
	}
	<-workDone
	mu.Lock()
	defer mu.Unlock()
	if !stopping {
		return ErrLeaseLost
	}
	return workErr
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
