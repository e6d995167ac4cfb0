//go:build e2e

package provisioner

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// burstClaims is the size of the burst each provisioner gets.
const burstClaims = 60

// TestE2EProvisionerBurstWrites provisions the same burst of claims with upstream's csi-provisioner
// (external-provisioner v6.4.0, built by e2e/tools) and then with Stowage's, one after the other on one control
// plane, each at its defaults, and counts each one's writes from the API server's audit log: PVs, claims, the
// claims' Events and, for Stowage, its journal Lease (the leader election Lease and its Event are left out
// for both). The claims are all there when the provisioner starts, so both see the same burst. Stowage writes
// what upstream writes for each claim, and its leak guarantee costs a few record writes for the whole burst.
func TestE2EProvisionerBurstWrites(t *testing.T) {
	e := setUpProvisionerTest(t)
	upstream, ours := peerBinaries(t)
	up := burstWrites(t, e, "burst-upstream", upstream)
	st := burstWrites(t, e, "burst-stowage", ours)
	t.Logf("writes per claim in a burst of %d claims\n%-10s %6s %6s %6s %6s %6s %9s\n%s\n%s", burstClaims,
		"", "PVs", "claims", "events", "record", "total", "per claim", up, st)
	if st.claims != 0 || st.pvs != burstClaims || up.pvs != burstClaims {
		t.Errorf("Stowage wrote %d claims and created %d PVs, upstream %d PVs; want 0, %d, %d", st.claims, st.pvs, up.pvs, burstClaims, burstClaims)
	}
	if st.total-st.record > up.total {
		t.Errorf("Stowage's writes besides its journal: %d, upstream's %d", st.total-st.record, up.total)
	}
	// One batch of entries (or a few, as workers reach it), and the clearing write at shutdown.
	if st.record == 0 || st.record > 4 {
		t.Errorf("%d journal writes for a burst of %d claims, want 1 to 4", st.record, burstClaims)
	}
}

// burstCount is one provisioner's writes for a burst.
type burstCount struct {
	name                               string
	pvs, claims, events, record, total int
}

func (b burstCount) perClaim() float64 { return float64(b.total) / burstClaims }

func (b burstCount) String() string {
	return fmt.Sprintf("%-10s %6d %6d %6d %6d %6d %9.3f", b.name, b.pvs, b.claims, b.events, b.record, b.total, b.perClaim())
}

// burstWrites creates burstClaims claims in namespace ns, runs the provisioner at path, waits until all are bound and their ProvisioningSucceeded Events written, stops the provisioner (SIGTERM, as a rolling update
// does) and counts its writes of that span.
func burstWrites(t *testing.T, e *provisionerTest, ns, path string) burstCount {
	t.Helper()
	ctx := context.Background()
	createNamespace(t, ctx, e.kube, ns)
	before := len(e.audit.MustWrites(t))
	var pvcs []*v1.PersistentVolumeClaim
	for i := range burstClaims {
		pvcs = append(pvcs, createClaim(t, e.kube, claim(ns, fmt.Sprintf("c%03d", i), "immediate", "1Gi")))
	}
	proc := startProvisionerAt(t, e.r, path, e.drv.Endpoint(), "--extra-create-metadata")
	for _, pvc := range pvcs {
		waitBound(t, e.kube, pvc)
	}
	rig.Eventually(t, ctx, 2*time.Minute, "a ProvisioningSucceeded Event per claim", func(ctx context.Context) (bool, error) {
		list, err := e.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=ProvisioningSucceeded"})
		return err == nil && len(list.Items) == burstClaims, err
	})
	proc.Signal(syscall.SIGTERM)
	<-proc.Done()

	writes := rig.Filter(e.audit.MustWrites(t)[before:], rig.ByUser(provisionerUser))
	c := burstCount{name: ns[len("burst-"):]}
	for _, w := range writes {
		switch {
		case strings.HasPrefix(w.Resource, "persistentvolumeclaims"):
			c.claims++
		case strings.HasPrefix(w.Resource, "persistentvolumes"):
			if w.Verb == "create" {
				c.pvs++
			}
		case strings.HasPrefix(w.Resource, "events") && strings.HasPrefix(w.Name, "c0"):
			// Events on the claims ("<claim>.<suffix>"), not the leader election one on the Lease.
			c.events++
		case strings.HasPrefix(w.Resource, "leases") && w.Name == journalLease:
			c.record++
		default:
			continue
		}
		c.total++
	}
	return c
}
