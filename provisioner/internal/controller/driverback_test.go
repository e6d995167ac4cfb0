package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
)

// A claim whose sync failed while the driver was away waits an hour of backoff here; DriverBack, the driver's
// return, retries it at once.
func TestDriverBackRetriesFailedClaims(t *testing.T) {
	r := newRecorder()
	r.claimErr = errors.New("rpc error: code = Unavailable desc = connection refused")
	kube := fake.NewClientset(testutil.Claim("ns", "data", "uid-1", "fast", "1Gi"))
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(kube, 0)
	q := newQueues(t, time.Hour, time.Hour)
	c, err := New(Config{Workers: 2, CloneWorkers: 1, SlowRetry: time.Hour}, r, Informers{
		Claims:  factory.Core().V1().PersistentVolumeClaims().Informer(),
		Volumes: factory.Core().V1().PersistentVolumes().Informer(),
		Classes: factory.Storage().V1().StorageClasses().Informer(),
	}, q)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })

	sharedtestutil.Eventually(t, waitTimeout, "a failed sync while the driver is down", func() (bool, error) {
		return r.count(r.claims, "data") == 1, nil
	})
	r.mu.Lock()
	r.claimErr = nil
	r.mu.Unlock()
	c.DriverBack(ctx)
	sharedtestutil.Eventually(t, waitTimeout, "the claim synced again after the driver came back", func() (bool, error) {
		return r.count(r.claims, "data") == 2, nil
	})
}
