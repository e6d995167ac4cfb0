package rig

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/csimock"
)

// HourBackoff are the arguments that make a sidecar wait an hour before retrying a failed operation: work it
// finishes within a test's minutes after the driver failed it was retried because the sidecar followed the
// driver's restart, not because its backoff ran out.
var HourBackoff = []string{"--retry-interval-start=1h", "--retry-interval-max=1h"}

// driverBackLine is what a sidecar logs (shared/csiconn) when it followed its driver's restart and is about to
// retry the work the restart interrupted.
const driverBackLine = "CSI driver is back and ready"

// RestartingDriver is a mock CSI driver that a test kills and serves again on the same socket, as a driver
// container that crashes and is restarted in its Pod: the sidecar's --csi-address stays the same.
type RestartingDriver struct {
	ctx  context.Context
	opts csimock.Options
	// Driver is the driver serving now: the first until KillDuring, then the restarted one.
	Driver *csimock.Driver
}

// StartRestartingDriver starts a mock driver with opts in a socket directory of its own (removed when t
// ends); each driver it starts is stopped when t ends.
func StartRestartingDriver(t testing.TB, ctx context.Context, opts csimock.Options) *RestartingDriver {
	t.Helper()
	// Not t.TempDir(): unix socket paths are limited to 107 bytes.
	dir, err := os.MkdirTemp("", "drvrestart")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	opts.SocketDir = dir
	d := &RestartingDriver{ctx: ctx, opts: opts}
	d.Driver = d.start(t)
	return d
}

func (d *RestartingDriver) start(t testing.TB) *csimock.Driver {
	t.Helper()
	drv, err := csimock.Start(d.ctx, d.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	return drv
}

// Endpoint is the address for the sidecar's --csi-address, the same before and after a restart.
func (d *RestartingDriver) Endpoint() string { return d.Driver.Endpoint() }

// Hold makes the serving driver's calls of method block until their caller gives up or the driver is killed;
// call it before the sidecar can make the call.
func (d *RestartingDriver) Hold(method string) {
	d.Driver.SetBeforeCall(func(ctx context.Context, m string, _ any) error {
		if m == method {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
}

// KillDuring waits until a call of method is in flight (held there by Hold) and kills the driver as a crash
// does: the socket goes, the call fails with Unavailable. It then serves a new driver, with the same options
// and so the same name and capabilities, on the same socket, and returns it and when it was back. A
// restarted mock driver starts empty: the volumes keep are added to it again, under their IDs, as soon as it
// serves, before the sidecar can have reconnected (which takes it a redial, a Probe and its identification
// calls).
func (d *RestartingDriver) KillDuring(t testing.TB, method string, keep ...csimock.Volume) (*csimock.Driver, time.Time) {
	t.Helper()
	first := d.Driver
	Eventually(t, d.ctx, 2*time.Minute, method+" in flight", func(context.Context) (bool, error) {
		return first.Calls(method) >= 1, nil
	})
	first.Stop()
	d.Driver = d.start(t)
	back := time.Now()
	for _, v := range keep {
		// The mock numbers volumes in the order they are added, so the same order gives the same IDs.
		if again := d.Driver.AddVolume(v.Name, v.CapacityBytes); again.ID != v.ID {
			t.Fatalf("the restarted driver names volume %s %s, want %s as before", v.Name, again.ID, v.ID)
		}
	}
	return d.Driver, back
}

// CheckFollowed checks that the sidecar p followed the driver's restart: it logged that the driver was back,
// and it still runs (upstream's sidecars exit when their driver's connection is lost). Call it after the
// interrupted work completed, which only the running sidecar can have done.
func CheckFollowed(t testing.TB, p *Process) {
	t.Helper()
	if done, err := p.Exited(); done {
		t.Errorf("%s exited when the driver restarted: %v", p.Name, err)
	}
	log, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), driverBackLine) {
		t.Errorf("%s did not log %q: it did not follow the driver's restart", p.Name, driverBackLine)
	}
}
