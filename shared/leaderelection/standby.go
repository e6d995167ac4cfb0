package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ClockSkewMargin is how long past the holder's renewTime + leaseDurationSeconds a standby still leaves the Lease
// alone: the holder wrote renewTime with its own clock, so a standby whose clock runs a little ahead must not
// take over while the holder still believes it leads. client-go's elector never reads renewTime and so needs
// no margin, but pays for that with a full lease duration counted from its own, polled, observation.
const ClockSkewMargin = 500 * time.Millisecond

// A standby does not poll the Lease as client-go's elector does (every retry period, counting the lease duration
// from its own last look, so a dead leader is replaced 15-22 s after its last renewal with the defaults). It
// watches the one Lease object and tries to take it as soon as it has expired by its holder's renewal, and only
// then hands the Lease to client-go's elector, which finds itself the holder and renews it as usual. Idle, a
// standby costs one watch and nothing else. The Lease, its fields and their meaning are upstream's, so
// upstream replicas and Stowage ones elect one leader among them.

// leaseView is what the watch last told a standby about the Lease.
type leaseView struct {
	exists   bool
	holder   string
	renew    time.Time // the holder's renewTime, by the holder's clock; zero if unset
	duration time.Duration
	// seenAt is when, by this candidate's clock, the watch delivered this renewal.
	seenAt time.Time
	// live says the renewal was seen to happen while watching (not in the first list): it happened shortly
	// before seenAt, so seenAt + duration bounds the Lease's end whatever the holder's clock says.
	live bool
}

// viewOf reads the election fields of a Lease seen at now.
func viewOf(l *coordinationv1.Lease, now time.Time, live bool) leaseView {
	v := leaseView{exists: true, seenAt: now, live: live}
	if l.Spec.HolderIdentity != nil {
		v.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil {
		v.renew = l.Spec.RenewTime.Time
	}
	if l.Spec.LeaseDurationSeconds != nil {
		v.duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return v
}

// sameRenewal says whether two views describe the same write of the holder (the same holder and renewal).
func (v leaseView) sameRenewal(o leaseView) bool {
	return v.exists == o.exists && v.holder == o.holder && v.renew.Equal(o.renew) && v.duration == o.duration
}

// takeoverAt is when identity may take the Lease: at once if there is none, it was released (no holder) or
// identity holds it already; otherwise when the holder's renewTime + leaseDurationSeconds + ClockSkewMargin has
// passed. Two bounds by this candidate's own clock guard against a holder whose clock is off: never later than
// seenAt + duration + margin (the renewal happened before it was seen), and for a renewal seen live never
// earlier than seenAt + duration (client-go's own rule, which holds under any skew).
func (v leaseView) takeoverAt(identity string) time.Time {
	if !v.exists || v.holder == "" || v.holder == identity {
		return time.Time{}
	}
	at := v.seenAt.Add(v.duration + ClockSkewMargin)
	if !v.renew.IsZero() {
		if byHolder := v.renew.Add(v.duration + ClockSkewMargin); byHolder.Before(at) {
			at = byHolder
		}
	}
	if v.live {
		if floor := v.seenAt.Add(v.duration); at.Before(floor) {
			at = floor
		}
	}
	return at
}

// leaseWatch keeps the latest leaseView from a single-object informer on the Lease.
type leaseWatch struct {
	name  string
	clock clock.PassiveClock
	// observed, if set, is called with every view the watch produces (tests wait on it).
	observed func(leaseView)

	mu      sync.Mutex
	view    leaseView
	changed chan struct{} // one pending wake-up for the standby loop
}

func newLeaseWatch(name string, clk clock.PassiveClock, observed func(leaseView)) *leaseWatch {
	return &leaseWatch{name: name, clock: clk, observed: observed, changed: make(chan struct{}, 1)}
}

func (w *leaseWatch) current() leaseView {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.view
}

// set records a view and wakes the standby loop. A view that repeats the current renewal (a relist, a label
// change) keeps the first sighting's time, which is the one that bounds the Lease's end.
func (w *leaseWatch) set(v leaseView) {
	w.mu.Lock()
	if w.view.sameRenewal(v) {
		w.mu.Unlock()
		return
	}
	w.view = v
	w.mu.Unlock()
	if w.observed != nil {
		w.observed(v)
	}
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *leaseWatch) onLease(obj any, live bool) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || l.Name != w.name {
		// The field selector lets only this Lease through; anything else is not ours to judge.
		return
	}
	w.set(viewOf(l, w.clock.Now(), live))
}

func (w *leaseWatch) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { w.onLease(obj, !initial) },
		UpdateFunc: func(_, obj any) { w.onLease(obj, true) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if l, ok := obj.(*coordinationv1.Lease); ok && l.Name == w.name {
				w.set(leaseView{seenAt: w.clock.Now()})
			}
		},
	}
}

// listWatch lists and watches the one Lease by name.
func listWatch(client kubernetes.Interface, namespace, name string, calls *apiCalls) cache.ListerWatcher {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	leases := client.CoordinationV1().Leases(namespace)
	// The wrapper tells the reflector whether client can stream the initial list (a fake clientset cannot).
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return calls.do(func() (runtime.Object, error) {
				o.FieldSelector = selector
				return leases.List(ctx, o)
			})
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return leases.Watch(ctx, o)
		},
	}, client)
}

// apiCalls brackets the informer's List calls. The reflector makes each List in a goroutine of its own and
// does not wait for it when it stops, so without this a List could still be running (and reading the
// process's logging configuration) after acquire returned; end waits for the one in flight and refuses new
// ones.
type apiCalls struct {
	mu    sync.RWMutex
	ended bool
}

func (c *apiCalls) do(call func() (runtime.Object, error)) (runtime.Object, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.ended {
		return nil, errors.New("the standby stopped watching the lease")
	}
	return call()
}

func (c *apiCalls) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ended = true
}

// standbyHooks let tests follow a standby; nil functions are skipped.
type standbyHooks struct {
	// observed sees every Lease view the watch produces.
	observed func(leaseView)
	// waiting sees each takeover time the standby waits for.
	waiting func(at time.Time)
}

// standby waits for the Lease and takes it.
type standby struct {
	cfg   *Config
	lock  resourcelock.Interface
	clock clock.WithTicker
	hooks standbyHooks
}

// acquire returns true once this candidate holds the Lease, false if ctx ended first. The informer stops
// before it returns: a leader does not watch its own Lease.
func (s *standby) acquire(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	w := newLeaseWatch(s.cfg.LockName, s.clock, s.hooks.observed)
	informerCtx, stopInformer := context.WithCancel(ctx)
	var informing sync.WaitGroup
	calls := &apiCalls{}
	defer func() {
		stopInformer()
		informing.Wait()
		calls.end()
	}()
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: listWatch(s.cfg.Client, s.cfg.Namespace, s.cfg.LockName, calls),
		ObjectType:    &coordinationv1.Lease{},
		Handler:       w.handler(),
	})
	informing.Go(func() { informer.RunWithContext(informerCtx) })
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return false
	}
	// The loop reads the view first; a wake-up from the initial list would only make it look twice.
	select {
	case <-w.changed:
	default:
	}

	logger.Info("Waiting to become leader, watching the lease")
	for {
		v := w.current()
		delay := time.Duration(-1) // wait for the watch only
		if at := v.takeoverAt(s.cfg.Identity); s.clock.Now().Before(at) {
			logger.V(4).Info("Lease is held", "holder", v.holder, "renewTime", v.renew, "takeoverAt", at)
			delay = at.Sub(s.clock.Now())
			if s.hooks.waiting != nil {
				s.hooks.waiting(at)
			}
		} else {
			took, err := s.tryTake(ctx, v)
			if took {
				return true
			}
			if err != nil {
				// The API server failed us: try again a retry period later, as client-go's elector would.
				logger.Error(err, "Taking the expired lease failed, retrying", "holder", v.holder)
				delay = s.cfg.RetryPeriod
			}
			// Otherwise the Lease changed since the watch reported it, and the watch brings the change.
		}
		if !s.wait(ctx, w.changed, delay) {
			return false
		}
	}
}

// wait returns true when the watch reports a change or, unless delay is negative, delay has passed; false
// when ctx ends.
func (s *standby) wait(ctx context.Context, changed <-chan struct{}, delay time.Duration) bool {
	var fire <-chan time.Time
	if delay >= 0 {
		t := s.clock.NewTimer(delay)
		defer t.Stop()
		fire = t.C()
	}
	select {
	case <-ctx.Done():
		return false
	case <-changed:
	case <-fire:
	}
	return true
}

// tryTake writes this candidate into the Lease, if it still is as the watch reported it: a fresh read first, so
// the write is conditional on exactly the renewal judged expired (the lock's Update carries its resourceVersion).
// It returns false without an error when the Lease changed or another candidate won the race.
func (s *standby) tryTake(ctx context.Context, seen leaseView) (bool, error) {
	logger := klog.FromContext(ctx)
	now := s.clock.Now()
	record := resourcelock.LeaderElectionRecord{
		HolderIdentity:       s.cfg.Identity,
		LeaseDurationSeconds: int(s.cfg.LeaseDuration / time.Second),
		AcquireTime:          metav1.NewTime(now),
		RenewTime:            metav1.NewTime(now),
	}
	old, _, err := s.lock.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		if seen.exists {
			return false, nil
		}
		err := s.lock.Create(ctx, record)
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("creating lease %s/%s: %w", s.cfg.Namespace, s.cfg.LockName, err)
		}
		logger.Info("Created the lease, now leader")
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading lease %s/%s: %w", s.cfg.Namespace, s.cfg.LockName, err)
	}
	fresh := leaseView{exists: true, holder: old.HolderIdentity, renew: old.RenewTime.Time,
		duration: time.Duration(old.LeaseDurationSeconds) * time.Second}
	if !fresh.sameRenewal(seen) {
		return false, nil
	}
	record.LeaderTransitions = old.LeaderTransitions
	if old.HolderIdentity == s.cfg.Identity {
		record.AcquireTime = old.AcquireTime
	} else {
		record.LeaderTransitions++
	}
	err = s.lock.Update(ctx, record)
	if apierrors.IsConflict(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("taking lease %s/%s: %w", s.cfg.Namespace, s.cfg.LockName, err)
	}
	logger.Info("Took the lease, now leader", "previousHolder", old.HolderIdentity, "previousRenewTime", old.RenewTime.Time)
	return true, nil
}

// release gives the Lease up as client-go's elector does (no holder, a one-second duration), if this candidate
// still holds it. Run uses it when it took the Lease but client-go's elector never led.
func (s *standby) release(ctx context.Context) error {
	old, _, err := s.lock.Get(ctx)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading lease %s/%s: %w", s.cfg.Namespace, s.cfg.LockName, err)
	}
	if old.HolderIdentity != s.cfg.Identity {
		return nil
	}
	now := metav1.NewTime(s.clock.Now())
	err = s.lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaderTransitions: old.LeaderTransitions,
		LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now})
	if err != nil {
		return fmt.Errorf("releasing lease %s/%s: %w", s.cfg.Namespace, s.cfg.LockName, err)
	}
	return nil
}
