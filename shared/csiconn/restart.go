package csiconn

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/connectivity"
	"k8s.io/klog/v2"
)

// Upstream's sidecars exit when the driver's socket goes away, and notice that only at their next call, which
// for an idle sidecar or one whose work waits out a backoff can be tens of seconds later; the restarted
// container then starts over (and, being a new leader election candidate, may wait out its own old Lease).
// FollowRestarts is the alternative a sidecar opts into while it leads: it watches the connection's state,
// redials at once when the driver goes away, and when the driver is back and ready tells the sidecar, which
// retries its pending work at once instead of after its backoff.

// redialInterval is how often a connection whose driver is away is redialled. gRPC's own backoff (up to 1 s
// here) would add most of a second to every restart; a failed dial of a missing socket costs one syscall,
// and this runs only while the driver is away.
const redialInterval = 100 * time.Millisecond

// driverIdentity is what a sidecar learnt about its driver at start-up and builds on.
type driverIdentity struct {
	name       string
	plugin     PluginCapabilities
	controller ControllerCapabilities
}

func (a driverIdentity) equal(b driverIdentity) bool {
	return a.name == b.name && maps.Equal(a.plugin.Services, b.plugin.Services) &&
		maps.Equal(a.plugin.VolumeExpansion, b.plugin.VolumeExpansion) && maps.Equal(a.controller, b.controller)
}

// learntIdentity keeps the first answer of each discovery call, as the sidecar learnt it at start-up.
type learntIdentity struct {
	mu                       sync.Mutex
	name, plugin, controller bool // which parts were learnt
	id                       driverIdentity
}

// record applies set to the learnt identity unless that part was learnt already.
func (l *learntIdentity) record(set func(*driverIdentity)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var fresh driverIdentity
	set(&fresh)
	if fresh.name != "" && !l.name {
		l.id.name, l.name = fresh.name, true
	}
	if fresh.plugin.Services != nil && !l.plugin {
		l.id.plugin, l.plugin = fresh.plugin, true
	}
	if fresh.controller != nil && !l.controller {
		l.id.controller, l.controller = fresh.controller, true
	}
}

// over returns now with every part the sidecar learnt replaced by what it learnt.
func (l *learntIdentity) over(now driverIdentity) driverIdentity {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.name {
		now.name = l.id.name
	}
	if l.plugin {
		now.plugin = l.id.plugin
	}
	if l.controller {
		now.controller = l.id.controller
	}
	return now
}

// identify reads the driver's name and its plugin and controller capabilities.
func (c *Conn) identify(ctx context.Context) (driverIdentity, error) {
	var id driverIdentity
	var err error
	if id.name, err = c.DriverName(ctx); err != nil {
		return id, err
	}
	if id.plugin, err = c.PluginCapabilities(ctx); err != nil {
		return id, err
	}
	if id.plugin.Has(csi.PluginCapability_Service_CONTROLLER_SERVICE) {
		if id.controller, err = c.ControllerCapabilities(ctx); err != nil {
			return id, err
		}
	}
	return id, nil
}

// lost is the connection-loss hook given to csi-lib-utils: redial while FollowRestarts runs, otherwise do what
// Options.OnConnectionLoss says (by default exit).
func (c *Conn) lost(ctx context.Context) bool {
	if c.following.Load() > 0 {
		klog.FromContext(ctx).Info("Lost the connection to the CSI driver, reconnecting")
		c.redials.Add(1)
		return true
	}
	return c.onLoss(ctx)
}

// FollowRestarts keeps the connection across restarts of the driver until ctx ends, and calls onBack each time
// the driver is back: connected again and ready by Probe, with the name and capabilities it had when
// FollowRestarts started. A driver that comes back as something else (another name, other capabilities, as
// after an upgrade) is treated as a lost connection (Options.OnConnectionLoss, by default exit), so that the
// sidecar starts over and learns it again, as upstream's would. It returns ctx's error, or an error if the
// driver cannot be identified at the start or the connection is closed.
func (c *Conn) FollowRestarts(ctx context.Context, onBack func(context.Context)) error {
	logger := klog.FromContext(ctx)
	// Following from here on: a driver that restarted before (while this replica stood by) is redialled too.
	c.following.Add(1)
	defer c.following.Add(-1)
	redials := c.redials.Load()
	now, away, err := c.identifyReady(ctx)
	if err != nil {
		return err
	}
	// A driver that went away and came back while identifyReady's calls ran (they redial it themselves) left
	// the connection Ready again before the state watch below began: only the redial count shows it.
	if n := c.redials.Load(); n != redials {
		redials, away = n, true
	}
	// The driver must be the one the sidecar learnt at start-up, not just the one answering now.
	known := c.learnt.over(now)
	if err := c.checkSame(ctx, known, now); err != nil {
		return err
	}
	if away {
		// The driver went away (or was not ready) after the sidecar started and is back: work that failed
		// meanwhile is retried now, as after any later return.
		logger.Info("CSI driver is back and ready")
		onBack(ctx)
	}

	down := false
	state := c.conn.GetState()
	for {
		switch state {
		case connectivity.Idle:
			// gRPC redials an idle connection only for the next call: redial now, so the driver's return is
			// noticed when it happens.
			down = true
			c.conn.Connect()
		case connectivity.Connecting, connectivity.TransientFailure:
			down = true
		case connectivity.Ready:
			// As at the start, the connection may have been lost and redialled between two state reads.
			if n := c.redials.Load(); n != redials {
				redials, down = n, true
			}
			if down {
				down = false
				logger.Info("CSI driver connection is back, probing the driver")
				if err := c.cameBack(ctx, known, onBack); err != nil {
					return err
				}
			}
		case connectivity.Shutdown:
			return fmt.Errorf("following CSI driver restarts: the connection is closed")
		}
		if !c.waitForStateChange(ctx, state) {
			return ctx.Err()
		}
		state = c.conn.GetState()
	}
}

// identifyReady probes the driver until it is ready and identifies it, retrying while it is away (a restart
// may fall between the two), and tells whether it was away or not ready at some point.
func (c *Conn) identifyReady(ctx context.Context) (driverIdentity, bool, error) {
	away := false
	for {
		// Probe first: the connection may have gone stale while nobody called (Unavailable until redialled).
		waited, err := c.probeUntilReady(ctx)
		away = away || waited
		if err != nil {
			return driverIdentity{}, away, fmt.Errorf("probing the CSI driver to follow its restarts: %w", err)
		}
		now, err := c.identify(ctx)
		if err == nil {
			return now, away, nil
		}
		if !isRetriableProbeError(err) || ctx.Err() != nil {
			return driverIdentity{}, away, fmt.Errorf("identifying the CSI driver to follow its restarts: %w", err)
		}
		away = true
	}
}

// waitForStateChange waits for the connection to leave state; false when ctx ended. While the driver is away
// (TransientFailure) it redials every redialInterval instead of waiting out gRPC's backoff.
func (c *Conn) waitForStateChange(ctx context.Context, state connectivity.State) bool {
	if state != connectivity.TransientFailure {
		return c.conn.WaitForStateChange(ctx, state)
	}
	for {
		waitCtx, cancel := context.WithTimeout(ctx, redialInterval)
		changed := c.conn.WaitForStateChange(waitCtx, state)
		cancel()
		switch {
		case changed:
			return true
		case ctx.Err() != nil:
			return false
		}
		c.conn.ResetConnectBackoff()
	}
}

// cameBack waits until the returned driver is ready, checks it is the same driver, and calls onBack. A driver
// that fails while being probed is left to the state watch: its next return is probed again.
func (c *Conn) cameBack(ctx context.Context, known driverIdentity, onBack func(context.Context)) error {
	logger := klog.FromContext(ctx)
	if err := c.ProbeUntilReady(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		logger.Error(err, "CSI driver came back but is not ready")
		return nil
	}
	now, err := c.identify(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		logger.Error(err, "CSI driver came back but cannot be identified")
		return nil
	}
	if err := c.checkSame(ctx, known, now); err != nil {
		return err
	}
	logger.Info("CSI driver is back and ready")
	onBack(ctx)
	return nil
}

// checkSame handles a driver that is not the known one as a lost connection (by default the process exits, to
// start over and learn the new driver) and returns an error naming both.
func (c *Conn) checkSame(ctx context.Context, known, now driverIdentity) error {
	if now.equal(known) {
		return nil
	}
	klog.FromContext(ctx).Info("CSI driver is not the one the sidecar started with, handling it as a lost connection",
		"name", now.name, "previousName", known.name)
	c.onLoss(ctx)
	return fmt.Errorf("CSI driver %q came back as %q or with other capabilities", known.name, now.name)
}

// StartFollowingRestarts runs FollowRestarts in the background for a sidecar's controller while this replica
// leads, logging why it ended early (after which a lost connection ends the process, as without it). The
// returned stop ends it and waits for it.
func (c *Conn) StartFollowingRestarts(ctx context.Context, onBack func(context.Context)) (stop func()) {
	followCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.FollowRestarts(followCtx, onBack); err != nil && followCtx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Not following CSI driver restarts any more; a lost connection ends the process")
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
