package controller

import (
	"errors"
	"testing"
	"time"

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
	c := startWith(t, r, kube, newQueues(t, time.Hour, time.Hour))
	sharedtestutil.Eventually(t, waitTimeout, "a failed sync while the driver is down", func() (bool, error) {
		return r.count(r.claims, "data") == 1, nil
	})
	r.mu.Lock()
	r.claimErr = nil
	r.mu.Unlock()
	c.DriverBack(t.Context())
	sharedtestutil.Eventually(t, waitTimeout, "the claim synced again after the driver came back", func() (bool, error) {
		return r.count(r.claims, "data") == 2, nil
	})
}
