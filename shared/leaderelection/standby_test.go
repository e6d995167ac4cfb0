package leaderelection

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stowage-csi/stowage/shared/testutil"
)

func TestTakeoverAt(t *testing.T) {
	seen := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	held := func(renew time.Time, live bool) leaseView {
		return leaseView{exists: true, holder: "b", renew: renew, duration: 15 * time.Second, seenAt: seen, live: live}
	}
	for _, tc := range []struct {
		name string
		view leaseView
		want time.Time // zero: at once
	}{
		{name: "no lease", view: leaseView{seenAt: seen}},
		{name: "released", view: leaseView{exists: true, renew: seen, duration: time.Second, seenAt: seen}},
		{name: "held by this candidate", view: leaseView{exists: true, holder: "a", renew: seen, duration: 15 * time.Second, seenAt: seen}},
		{
			name: "renewal in the first list: the holder's renewTime counts",
			view: held(seen.Add(-10*time.Second), false),
			want: seen.Add(5*time.Second + ClockSkewMargin),
		},
		{
			name: "long-dead holder in the first list: at once",
			view: held(seen.Add(-time.Hour), false),
			want: seen.Add(-time.Hour + 15*time.Second + ClockSkewMargin),
		},
		{
			name: "renewal seen live with synchronized clocks",
			view: held(seen.Add(-20*time.Millisecond), true),
			want: seen.Add(15*time.Second - 20*time.Millisecond + ClockSkewMargin),
		},
		{
			name: "renewal seen live from a holder whose clock is 10 s behind: never before seenAt + duration",
			view: held(seen.Add(-10*time.Second), true),
			want: seen.Add(15 * time.Second),
		},
		{
			name: "holder clock an hour ahead: never after seenAt + duration + margin",
			view: held(seen.Add(time.Hour), true),
			want: seen.Add(15*time.Second + ClockSkewMargin),
		},
		{
			name: "no renewTime: counted from the sighting",
			view: held(time.Time{}, false),
			want: seen.Add(15*time.Second + ClockSkewMargin),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.view.takeoverAt("a"); !got.Equal(tc.want) {
				t.Errorf("takeoverAt = %v, want %v", got, tc.want)
			}
		})
	}
}

// heldLease is a Lease held by holder, renewed at renew for duration.
func heldLease(holder string, renew time.Time, duration time.Duration, transitions int32) *coordinationv1.Lease {
	rt := metav1.NewMicroTime(renew)
	seconds := int32(duration / time.Second)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: testLock, Namespace: testNS},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, AcquireTime: &rt,
			RenewTime: &rt, LeaseTransitions: &transitions},
	}
}

// standbyRun is an Elector on the fake clock, reporting what its standby saw and waited for.
type standbyRun struct {
	e       *Elector
	mu      sync.Mutex
	views   []leaseView
	waits   []time.Time
	leading chan struct{}
	result  chan error
}

func startStandby(t *testing.T, client kubernetes.Interface, clk *clocktesting.FakeClock) *standbyRun {
	t.Helper()
	cfg := testConfig(nil, "a")
	cfg.Client, cfg.Clock = client, clk
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &standbyRun{e: e, leading: make(chan struct{}), result: make(chan error, 1)}
	e.hooks = standbyHooks{
		observed: func(v leaseView) { r.mu.Lock(); r.views = append(r.views, v); r.mu.Unlock() },
		waiting:  func(at time.Time) { r.mu.Lock(); r.waits = append(r.waits, at); r.mu.Unlock() },
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		r.result <- e.Run(ctx, func(wctx context.Context) error {
			close(r.leading)
			<-wctx.Done()
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-r.result; err != nil {
			t.Errorf("Run() = %v", err)
		}
	})
	return r
}

// waitingFor waits until the standby reports waiting for at.
func (r *standbyRun) waitingFor(t *testing.T, at time.Time) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "the standby to wait for "+at.String(), func() (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.waits) > 0 && r.waits[len(r.waits)-1].Equal(at), nil
	})
}

// leaseActions are the verbs the fake API server saw on Leases.
func leaseActions(client *fake.Clientset) []string {
	var verbs []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "leases" {
			verbs = append(verbs, a.GetVerb())
		}
	}
	return verbs
}

// A leader that died 3 s into a 15 s lease: the standby, started after, takes the Lease at the holder's renewTime
// + 15 s + the skew margin by its clock, not 15 s after its own first look as client-go's elector would.
func TestStandbyTakesOverWhenTheHolderRenewalExpires(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	renewed := clk.Now().Add(-3 * time.Second)
	client := fake.NewClientset(heldLease("dead", renewed, 15*time.Second, 4))
	r := startStandby(t, client, clk)

	expiry := renewed.Add(15*time.Second + ClockSkewMargin)
	r.waitingFor(t, expiry)
	if got := leaseActions(client); len(got) != 2 || got[0] != "list" || got[1] != "watch" {
		t.Fatalf("a waiting standby sent %v to the API server, want only [list watch]", got)
	}
	clk.SetTime(expiry)
	<-r.leading
	l := getLease(t, client)
	if holder(l) != "a" || !l.Spec.AcquireTime.Time.Equal(expiry) || *l.Spec.LeaseTransitions != 5 {
		t.Errorf("after the takeover the Lease is held by %q since %v with %d transitions, want a since %v with 5",
			holder(l), l.Spec.AcquireTime.Time, *l.Spec.LeaseTransitions, expiry)
	}
	if *l.Spec.LeaseDurationSeconds != 2 {
		t.Errorf("leaseDurationSeconds = %d, want the standby's own 2", *l.Spec.LeaseDurationSeconds)
	}
}

// A live leader renewing: each renewal moves the standby's takeover time, and the standby sends nothing but its
// watch; renewals from a holder whose clock is behind are judged by when they were seen.
func TestStandbyFollowsRenewalsWithTheWatchOnly(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	client := fake.NewClientset(heldLease("b", clk.Now(), 15*time.Second, 0))
	r := startStandby(t, client, clk)
	r.waitingFor(t, clk.Now().Add(15*time.Second+ClockSkewMargin))

	leases := client.CoordinationV1().Leases(testNS)
	for i := range 3 {
		clk.Step(5 * time.Second)
		behind := time.Duration(i) * 10 * time.Second // the third renewal comes from a clock 20 s behind
		rt := metav1.NewMicroTime(clk.Now().Add(-behind))
		l := getLease(t, client)
		l.Spec.RenewTime = &rt
		if _, err := leases.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want := rt.Add(15*time.Second + ClockSkewMargin)
		if floor := clk.Now().Add(15 * time.Second); want.Before(floor) {
			want = floor
		}
		r.waitingFor(t, want)
	}
	r.mu.Lock()
	live := len(r.views) == 4 && r.views[1].live && r.views[2].live && r.views[3].live && !r.views[0].live
	r.mu.Unlock()
	if !live {
		t.Errorf("views %+v: want the first listed and three live renewals", r.views)
	}
	var writes []string
	for _, v := range leaseActions(client) {
		if v != "list" && v != "watch" && v != "get" && v != "update" {
			writes = append(writes, v)
		}
	}
	// The test itself reads and updates the Lease three times each; everything else must be the watch.
	if got := leaseActions(client); len(got) != 2+6 || len(writes) != 0 || countOf(got, "get") != 3 || countOf(got, "update") != 3 {
		t.Errorf("lease requests %v: want list, watch and the test's own 3 gets and 3 updates", got)
	}
	select {
	case <-r.leading:
		t.Error("the standby led while the holder renewed")
	default:
	}
}

func countOf(verbs []string, verb string) int {
	n := 0
	for _, v := range verbs {
		if v == verb {
			n++
		}
	}
	return n
}

// The Lease changes between the watch's report and the takeover's read: the standby leaves it to the new
// holder instead of overwriting a fresh renewal.
func TestStandbyTakesOnlyTheRenewalItJudged(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	renewed := clk.Now().Add(-20 * time.Second)
	client := testutil.NewClientset(heldLease("dead", renewed, 15*time.Second, 0))
	cfg := testConfig(client, "a")
	cfg.Clock = clk
	s := &standby{cfg: &cfg, clock: clk}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.lock = e.lock
	seen := viewOf(heldLease("dead", renewed, 15*time.Second, 0), clk.Now(), false)

	// Someone else renewed in between.
	l := getLease(t, client)
	rt := metav1.NewMicroTime(clk.Now())
	l.Spec.RenewTime = &rt
	if _, err := client.CoordinationV1().Leases(testNS).Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	took, err := s.tryTake(context.Background(), seen)
	if took || err != nil {
		t.Fatalf("tryTake over a fresh renewal = %v, %v; want false, nil", took, err)
	}
	if got := holder(getLease(t, client)); got != "dead" {
		t.Fatalf("holder = %q, want the renewing holder kept", got)
	}

	// Now the judged renewal is the current one: the standby takes it.
	seen = viewOf(getLease(t, client), clk.Now(), false)
	took, err = s.tryTake(context.Background(), seen)
	if !took || err != nil {
		t.Fatalf("tryTake = %v, %v; want true, nil", took, err)
	}
	if got := holder(getLease(t, client)); got != "a" {
		t.Errorf("holder = %q, want a", got)
	}
}
