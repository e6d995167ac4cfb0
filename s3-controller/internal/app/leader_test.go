package app

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeLock is a resourcelock.Interface whose writes succeed or fail as told.
type fakeLock struct {
	resourcelock.Interface
	fail error
}

func (f *fakeLock) Identity() string { return "me" }
func (f *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	return f.fail
}

func TestLeaderElectionHealth(t *testing.T) {
	inner := &fakeLock{}
	w := &watchedLock{Interface: inner}
	elected := make(chan struct{})
	check := w.check(elected, time.Second)
	if err := check(nil); err != nil {
		t.Fatalf("standby unhealthy: %v", err)
	}
	close(elected)
	if err := check(nil); err == nil {
		t.Fatal("leader that never renewed is healthy")
	}
	if err := w.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	if err := check(nil); err != nil {
		t.Fatalf("leader that just renewed is unhealthy: %v", err)
	}
	// A write for someone else (a release clears the holder) is not a renewal.
	w.mu.Lock()
	w.lastRenew = time.Now().Add(-time.Minute)
	w.mu.Unlock()
	_ = w.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: ""})
	if err := check(nil); err == nil {
		t.Fatal("a release counted as a renewal")
	}
}
