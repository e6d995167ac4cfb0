package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/stowage-csi/stowage/s3-controller/internal/config"
)

// serviceAccountNamespace is where a Pod finds its own namespace (controller-runtime's default for the Lease).
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// healthSlack is how long past the lease duration a leader may fail to renew before /healthz fails,
// as the Kubernetes sidecars' /healthz/leader-election.
const healthSlack = 20 * time.Second

// watchedLock is the Lease lock controller-runtime would build (a "leases" lock named as upstream's, so a
// mixed upstream/Stowage Deployment elects one leader), remembering when this replica last renewed it.
type watchedLock struct {
	resourcelock.Interface
	mu        sync.Mutex
	lastRenew time.Time
}

func newLeaseLock(rc *rest.Config, cfg *config.Config) (*watchedLock, error) {
	ns := cfg.LeaderElectionNamespace
	if ns == "" {
		data, err := os.ReadFile(serviceAccountNamespace)
		if err != nil {
			return nil, fmt.Errorf("--leader-election-namespace is empty and not running in a Pod (%w)", err)
		}
		ns = strings.TrimSpace(string(data))
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("hostname for the leader identity: %w", err)
	}
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix)
	// The leader election client is its own, so renewals never queue behind the controller's requests.
	client, err := kubernetes.NewForConfig(rest.CopyConfig(rc))
	if err != nil {
		return nil, err
	}
	l, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, config.LeaseName, client.CoreV1(), client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + hex.EncodeToString(suffix)})
	if err != nil {
		return nil, fmt.Errorf("lease lock %s/%s: %w", ns, config.LeaseName, err)
	}
	return &watchedLock{Interface: l}, nil
}

func (w *watchedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := w.Interface.Create(ctx, ler)
	w.record(err, ler)
	return err
}

func (w *watchedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := w.Interface.Update(ctx, ler)
	w.record(err, ler)
	return err
}

func (w *watchedLock) record(err error, ler resourcelock.LeaderElectionRecord) {
	if err == nil && ler.HolderIdentity == w.Identity() {
		w.mu.Lock()
		w.lastRenew = time.Now()
		w.mu.Unlock()
	}
}

// check is /healthz/leader-election: healthy unless this replica leads and has not renewed for longer than
// the lease duration plus a margin (a standby is always healthy).
func (w *watchedLock) check(elected <-chan struct{}, leaseDuration time.Duration) func(*http.Request) error {
	return func(*http.Request) error {
		select {
		case <-elected:
		default:
			return nil
		}
		w.mu.Lock()
		last := w.lastRenew
		w.mu.Unlock()
		if since := time.Since(last); since > leaseDuration+healthSlack {
			return fmt.Errorf("leader has not renewed the Lease for %s", since.Round(time.Second))
		}
		return nil
	}
}
