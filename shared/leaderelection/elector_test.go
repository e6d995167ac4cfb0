package leaderelection

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stowage-csi/stowage/shared/testutil"
)

const (
	testNS   = "kube-system"
	testLock = "external-attacher-leader-ebs-csi-aws-com"
)

// Lease durations are whole seconds in the API, so 2s is the shortest useful lease.
func testConfig(client *fake.Clientset, identity string) Config {
	return Config{
		Enabled:       true,
		Client:        client,
		LockName:      testLock,
		Namespace:     testNS,
		Identity:      identity,
		LeaseDuration: 2 * time.Second,
		RenewDeadline: time.Second,
		RetryPeriod:   100 * time.Millisecond,
		ReleaseOnExit: true,
		OnLost:        func() {},
	}
}

func getLease(t *testing.T, client *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	lease, err := client.CoordinationV1().Leases(testNS).Get(context.Background(), testLock, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting the lease: %v", err)
	}
	return lease
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// leaseUpdates counts the writes to the Lease the fake API server has seen.
func leaseUpdates(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "leases" {
			n++
		}
	}
	return n
}

func TestDisabledRunsWorkDirectly(t *testing.T) {
	e, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := errors.New("work result")
	if got := e.Run(context.Background(), func(context.Context) error { return want }); !errors.Is(got, want) {
		t.Errorf("Run() = %v, want %v", got, want)
	}
	if err := e.Check(httptest.NewRequest("GET", HealthzPath, nil)); err != nil {
		t.Errorf("Check() = %v, want nil", err)
	}
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"no client", func(c *Config) { c.Client = nil }},
		{"no lock name", func(c *Config) { c.LockName = "" }},
		{"no namespace", func(c *Config) { c.Namespace = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(fake.NewClientset(), "a")
			tt.mutate(&cfg)
			if _, err := New(cfg); err == nil {
				t.Fatal("New succeeded")
			}
		})
	}
}

func TestGracefulExitDrainsThenReleases(t *testing.T) {
	tests := []struct {
		name       string
		release    bool
		wantHolder string
	}{
		{name: "release on exit", release: true, wantHolder: ""},
		{name: "upstream behaviour keeps the lease", release: false, wantHolder: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			reg := prometheus.NewRegistry()
			cfg := testConfig(client, "a")
			cfg.ReleaseOnExit = tt.release
			cfg.Registerer = reg
			cfg.Labels = map[string]string{"app": "csi-attacher"}
			e, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			started := make(chan struct{})
			draining := make(chan struct{})
			finishDrain := make(chan struct{})
			holderWhileDraining := ""
			result := make(chan error, 1)
			go func() {
				result <- e.Run(ctx, func(wctx context.Context) error {
					close(started)
					<-wctx.Done()
					close(draining)
					<-finishDrain
					// Not getLease: t.Fatal must not run outside the test goroutine.
					if l, err := client.CoordinationV1().Leases(testNS).Get(context.Background(), testLock, metav1.GetOptions{}); err == nil {
						holderWhileDraining = holder(l)
					}
					return nil
				})
			}()
			<-started
			lease := getLease(t, client)
			if holder(lease) != "a" || lease.Labels["app"] != "csi-attacher" {
				t.Errorf("lease holder %q labels %v, want holder a with app=csi-attacher", holder(lease), lease.Labels)
			}
			if v := promtestutil.ToFloat64(e.status); v != 1 {
				t.Errorf("leader_election_master_status = %v while leading, want 1", v)
			}
			if err := e.Check(httptest.NewRequest("GET", HealthzPath, nil)); err != nil {
				t.Errorf("healthz while leading: %v", err)
			}

			cancel()
			<-draining
			// Hold the drain until the leader has renewed twice more: it must keep renewing meanwhile.
			renewals := leaseUpdates(client) + 2
			testutil.Eventually(t, 30*time.Second, "renewals while work drains", func() (bool, error) {
				return leaseUpdates(client) >= renewals, nil
			})
			close(finishDrain)
			if err := <-result; err != nil {
				t.Fatalf("Run() = %v", err)
			}
			if holderWhileDraining != "a" {
				t.Errorf("holder while draining = %q, want a (the lease must be kept until work returns)", holderWhileDraining)
			}
			if got := holder(getLease(t, client)); got != tt.wantHolder {
				t.Errorf("holder after exit = %q, want %q", got, tt.wantHolder)
			}
			if v := promtestutil.ToFloat64(e.status); v != 0 {
				t.Errorf("leader_election_master_status = %v after exit, want 0", v)
			}
			if n, err := promtestutil.GatherAndCount(reg, "leader_election_master_status"); err != nil || n != 1 {
				t.Errorf("leader_election_master_status series = %d (%v), want 1", n, err)
			}
		})
	}
}

func TestStandbyTakesOverAfterRelease(t *testing.T) {
	client := fake.NewClientset()
	runCandidate := func(ctx context.Context, id string, leading chan<- string) (*Elector, chan error) {
		e, err := New(testConfig(client, id))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			done <- e.Run(ctx, func(wctx context.Context) error {
				leading <- id
				<-wctx.Done()
				return nil
			})
		}()
		return e, done
	}
	leading := make(chan string, 2)
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	_, doneA := runCandidate(ctxA, "a", leading)
	if first := <-leading; first != "a" {
		t.Fatalf("first leader %q, want a", first)
	}
	_, doneB := runCandidate(ctxB, "b", leading)

	cancelA()
	if err := <-doneA; err != nil {
		t.Fatalf("candidate a: %v", err)
	}
	select {
	case second := <-leading:
		if second != "b" {
			t.Fatalf("second leader %q, want b", second)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("standby never became leader")
	}
	if got := holder(getLease(t, client)); got != "b" {
		t.Errorf("holder = %q, want b", got)
	}
	cancelB()
	if err := <-doneB; err != nil {
		t.Fatalf("candidate b: %v", err)
	}
}

func TestLostLeaseCallsOnLost(t *testing.T) {
	client := fake.NewClientset()
	var failRenewals atomic.Bool
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failRenewals.Load() {
			return true, nil, errors.New("API server unreachable")
		}
		return false, nil, nil
	})
	lost := make(chan struct{})
	cfg := testConfig(client, "a")
	cfg.OnLost = func() { close(lost) }
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var workCtxErr error
	result := make(chan error, 1)
	go func() {
		result <- e.Run(context.Background(), func(wctx context.Context) error {
			close(started)
			<-wctx.Done()
			workCtxErr = wctx.Err()
			return nil
		})
	}()
	<-started
	failRenewals.Store(true)
	select {
	case <-lost:
	case <-time.After(30 * time.Second):
		t.Fatal("OnLost was not called after renewals failed")
	}
	if err := <-result; !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Run() = %v, want ErrLeaseLost", err)
	}
	if workCtxErr == nil {
		t.Error("work's context was not cancelled when the lease was lost")
	}
}

func TestWorkErrorReleasesLease(t *testing.T) {
	client := fake.NewClientset()
	e, err := New(testConfig(client, "a"))
	if err != nil {
		t.Fatal(err)
	}
	want := errors.New("informers never synced")
	if got := e.Run(context.Background(), func(context.Context) error { return want }); !errors.Is(got, want) {
		t.Fatalf("Run() = %v, want %v", got, want)
	}
	if got := holder(getLease(t, client)); got != "" {
		t.Errorf("holder = %q after work failed, want the lease released", got)
	}
}

func TestCancelBeforeLeadingSkipsWork(t *testing.T) {
	now := metav1.NewMicroTime(time.Now())
	other, duration := "other", int32(3600)
	client := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: testLock, Namespace: testNS},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &other, LeaseDurationSeconds: &duration,
			AcquireTime: &now, RenewTime: &now},
	})
	e, err := New(testConfig(client, "a"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	var ran atomic.Bool
	go func() {
		result <- e.Run(ctx, func(context.Context) error { ran.Store(true); return nil })
	}()
	testutil.Eventually(t, 30*time.Second, "a watch on the lease", func() (bool, error) {
		for _, a := range client.Actions() {
			if a.GetVerb() == "watch" && strings.Contains(a.GetResource().Resource, "leases") {
				return true, nil
			}
		}
		return false, nil
	})
	cancel()
	if err := <-result; err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if ran.Load() {
		t.Error("work ran without leadership")
	}
	if got := holder(getLease(t, client)); got != "other" {
		t.Errorf("holder = %q, want the other candidate untouched", got)
	}
}
