package csiconn

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/stowage-csi/stowage/shared/testutil"
)

// restart serves d again on its socket, as a driver container restarted by the kubelet does, until the
// returned function stops it (at the latest when the test ends).
func restart(t *testing.T, d *testutil.FakeCSIDriver) (stop func()) {
	t.Helper()
	l, err := net.Listen("unix", d.Address)
	if err != nil {
		t.Fatalf("listening again on %s: %v", d.Address, err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	stop = func() {
		srv.Stop()
		<-served
	}
	t.Cleanup(stop)
	return stop
}

// following is FollowRestarts running on a connection until the test ends.
type following struct {
	back  chan struct{} // receives each return of the driver
	ended chan struct{} // closed when FollowRestarts has returned
	err   error         // its result, once ended
}

// waitBack waits for the driver to be reported back; FollowRestarts ending first, or 30 s, fails t with what.
func (f *following) waitBack(t *testing.T, what string) {
	t.Helper()
	select {
	case <-f.back:
	case <-f.ended:
		t.Fatalf("FollowRestarts() = %v before reporting the driver back", f.err)
	case <-time.After(30 * time.Second):
		t.Fatal(what)
	}
}

func follow(t *testing.T, c *Conn) *following {
	t.Helper()
	f := &following{back: make(chan struct{}, 4), ended: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(f.ended)
		f.err = c.FollowRestarts(ctx, func(context.Context) { f.back <- struct{}{} })
	}()
	t.Cleanup(func() {
		cancel()
		<-f.ended
	})
	// FollowRestarts counts itself before it identifies the driver: a driver replaced in between would be
	// the one it follows. Its first calls record the driver's name, unless the test learnt it before.
	testutil.Eventually(t, 30*time.Second, "FollowRestarts to identify the driver", func() (bool, error) {
		c.learnt.mu.Lock()
		defer c.learnt.mu.Unlock()
		return c.following.Load() == 1 && c.learnt.name, nil
	})
	return f
}

func TestFollowRestartsReportsTheDriverBack(t *testing.T) {
	d := testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{Name: "d",
		PluginServices: []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE},
		ControllerCaps: []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME}})
	c, lost := connect(t, d, nil)
	f := follow(t, c)

	stop := d.Stop
	for round := range 2 {
		probes := d.ProbeCount()
		stop()
		stop = restart(t, d)
		select {
		case <-f.back:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: the driver's return was not reported, without any call made through the connection", round)
		}
		if d.ProbeCount() <= probes {
			t.Errorf("round %d: the driver was reported back without a Probe", round)
		}
		if _, err := c.DriverName(context.Background()); err != nil {
			t.Errorf("round %d: a call after the driver's return failed: %v", round, err)
		}
	}
	select {
	case <-lost:
		t.Error("the connection-loss hook ran while following restarts")
	default:
	}
}

func TestFollowRestartsTreatsAnotherDriverAsLost(t *testing.T) {
	d := testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{Name: "d"})
	c, lost := connect(t, d, nil)
	f := follow(t, c)
	d.Stop()
	d.Name = "upgraded"
	restart(t, d)
	select {
	case <-f.ended:
		if f.err == nil || !strings.Contains(f.err.Error(), `"upgraded"`) {
			t.Fatalf("FollowRestarts() = %v, want an error naming the new driver", f.err)
		}
	case <-f.back:
		t.Fatal("a driver that came back under another name was reported back")
	case <-time.After(30 * time.Second):
		t.Fatal("FollowRestarts did not notice the driver changed")
	}
	select {
	case <-lost:
	default:
		t.Error("the connection-loss hook did not run for a changed driver")
	}
}

func TestPendingRequeuesFailedAndRunningItems(t *testing.T) {
	p := NewPending[string]()
	release := make(chan struct{})
	running := make(chan struct{})
	process := p.Track(func(_ context.Context, item string) error {
		switch item {
		case "fails":
			return errors.New("driver unavailable")
		case "runs":
			close(running)
			<-release
		}
		return nil
	})
	if err := process(context.Background(), "fails"); err == nil {
		t.Fatal("the failing item succeeded")
	}
	if err := process(context.Background(), "succeeds"); err != nil {
		t.Fatal(err)
	}
	finished := make(chan error, 1)
	go func() { finished <- process(context.Background(), "runs") }()
	<-running

	var got []string
	if n := p.Requeue(func(item string) { got = append(got, item) }); n != 2 {
		t.Errorf("Requeue() = %d, want 2", n)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"fails", "runs"}) {
		t.Errorf("requeued %v, want [fails runs]", got)
	}
	close(release)
	if err := <-finished; err != nil {
		t.Fatal(err)
	}
	got = nil
	p.Requeue(func(item string) { got = append(got, item) })
	if !slices.Equal(got, []string{"fails"}) {
		t.Errorf("after the running item succeeded, requeued %v, want [fails]", got)
	}
}

// A driver replaced while nobody followed it (this replica stood by) is checked against what the sidecar
// learnt at start-up when following starts, not taken as the driver to follow.
func TestFollowRestartsRefusesADriverChangedBeforeIt(t *testing.T) {
	d := testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{Name: "d"})
	c, lost := connect(t, d, nil)
	if _, err := c.DriverName(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.Stop()
	d.Name = "upgraded"
	restart(t, d)
	err := c.FollowRestarts(context.Background(), func(context.Context) { t.Error("a changed driver was reported back") })
	if err == nil || !strings.Contains(err.Error(), `"upgraded"`) {
		t.Fatalf("FollowRestarts() = %v, want an error naming the new driver", err)
	}
	select {
	case <-lost:
	default:
		t.Error("the connection-loss hook did not run for a changed driver")
	}
}

// A driver that is away or not ready when FollowRestarts starts (it restarted after the sidecar learnt it, or
// between FollowRestarts' first calls) is reported back once ready, so work that failed meanwhile is retried.
func TestFollowRestartsReportsADriverThatWasNotReadyAtTheStart(t *testing.T) {
	d := testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{Name: "d", NotReadyProbes: 1})
	c, _ := connect(t, d, nil)
	if d.ProbeCount() != 0 {
		t.Fatalf("Connect probed the driver %d times; this test needs FollowRestarts' probe to be the first", d.ProbeCount())
	}
	f := follow(t, c)
	f.waitBack(t, "a driver that was not ready when FollowRestarts started was not reported back")
	if n := d.ProbeCount(); n < 2 {
		t.Errorf("the driver was reported back after %d Probe calls, want a ready one after the not-ready one", n)
	}
}

func TestStartFollowingRestartsCallsBackUntilStopped(t *testing.T) {
	d := testutil.StartFakeCSIDriver(t, &testutil.FakeCSIDriver{Name: "d"})
	c, _ := connect(t, d, nil)
	back := make(chan struct{}, 4)
	stop := c.StartFollowingRestarts(context.Background(), func(context.Context) { back <- struct{}{} })
	testutil.Eventually(t, 30*time.Second, "StartFollowingRestarts to identify the driver", func() (bool, error) {
		return c.following.Load() == 1, nil
	})
	d.Stop()
	restart(t, d)
	select {
	case <-back:
	case <-time.After(30 * time.Second):
		t.Fatal("the driver's return was not reported")
	}
	stop()
	if n := c.following.Load(); n != 0 {
		t.Errorf("after stop, %d FollowRestarts still running", n)
	}
}

// replacedInProbe is a driver whose container is replaced while the sidecar's first Probe is answered: the
// new one takes the socket and the old one drains its connection (GOAWAY) once that Probe is out. The
// sidecar's next calls redial by themselves and reach the new driver, so the connection is Ready again
// before FollowRestarts watches its state.
type replacedInProbe struct {
	*testutil.FakeCSIDriver
	t        *testing.T
	old      *grpc.Server
	replaced sync.Once
}

func (r *replacedInProbe) Probe(ctx context.Context, req *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	r.replaced.Do(func() {
		if err := os.Remove(r.Address); err != nil {
			r.t.Errorf("removing the old driver's socket: %v", err)
		}
		restart(r.t, r.FakeCSIDriver)
		go r.old.GracefulStop()
	})
	return r.FakeCSIDriver.Probe(ctx, req)
}

// A restart that falls inside FollowRestarts' first calls is reported too: the work that failed while the
// driver was away is retried.
func TestFollowRestartsReportsARestartDuringItsFirstCalls(t *testing.T) {
	d := &testutil.FakeCSIDriver{Name: "d"}
	d.Address = filepath.Join(t.TempDir(), "csi.sock")
	r := &replacedInProbe{FakeCSIDriver: d, t: t, old: grpc.NewServer()}
	csi.RegisterIdentityServer(r.old, r)
	l, err := net.Listen("unix", d.Address)
	if err != nil {
		t.Fatal(err)
	}
	// The socket path is the new driver's by the time the old listener closes.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = r.old.Serve(l)
	}()
	t.Cleanup(func() {
		r.old.Stop()
		<-served
	})
	c, lost := connect(t, d, nil)
	f := follow(t, c)
	f.waitBack(t, "a driver replaced during FollowRestarts' first calls was not reported back")
	select {
	case <-lost:
		t.Error("the connection-loss hook ran while following restarts")
	default:
	}
}
