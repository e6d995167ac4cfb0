package provision

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
)

// refreshes records what the provisioner told the capacity controller, as "class segment..." strings.
type refreshes struct {
	mu  sync.Mutex
	got []string
}

func (r *refreshes) Refresh(class string, affinity *v1.VolumeNodeAffinity) {
	s := class
	if affinity != nil {
		for _, term := range affinity.Required.NodeSelectorTerms {
			for _, e := range term.MatchExpressions {
				s += fmt.Sprintf(" %s=%v", e.Key, e.Values)
			}
		}
	}
	r.mu.Lock()
	r.got = append(r.got, s)
	r.mu.Unlock()
}

// Upstream refreshes CSIStorageCapacity after every CreateVolume and DeleteVolume (its capacity controller
// re-queues the volume's segments, or its class); before, only the periodic poll did, so the scheduler placed
// claims on capacity a volume had just used up.
func TestCapacityRefreshedAfterCreateAndDelete(t *testing.T) {
	zoneB := []*csi.Topology{{Segments: map[string]string{"zone": "b"}}}
	for _, tc := range []struct {
		name      string
		topology  []*csi.Topology
		createErr error
		want      []string
	}{
		{name: "volume with topology: its segment", topology: zoneB, want: []string{"fast zone=[b]"}},
		{name: "volume without topology: its class", want: []string{"fast"}},
		{name: "failed CreateVolume: its class", createErr: testutil.Code(codes.Internal), want: []string{"fast"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := testutil.Claim("ns", "data", uid, "fast", "1Gi")
			h := newHarness(t, defaultConfig(), claim, testutil.Class("fast", nil))
			r := &refreshes{}
			h.p.Capacity = r
			h.csi.CreatedTopology, h.csi.CreateErr = tc.topology, tc.createErr
			if err := h.p.SyncClaim(context.Background(), claim.DeepCopy()); (err != nil) != (tc.createErr != nil) {
				t.Fatalf("SyncClaim: %v", err)
			}
			if !equal(r.got, tc.want) {
				t.Errorf("refreshed %q, want %q", r.got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		pv   *v1.PersistentVolume
		want []string
	}{
		{name: "deleted volume with node affinity: its segment", pv: releasedPV(withAffinity(labelTerm("zone", v1.NodeSelectorOpIn, "a"))), want: []string{"fast zone=[a]"}},
		// As upstream: a volume without node affinity says nothing of where space was freed; the poll covers it.
		{name: "deleted volume without node affinity: nothing", pv: releasedPV()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, defaultConfig(), tc.pv)
			r := &refreshes{}
			h.p.Capacity = r
			if err := h.p.SyncVolume(context.Background(), tc.pv.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			if len(h.csi.Deletes) != 1 || !equal(r.got, tc.want) {
				t.Errorf("%d deletes, refreshed %q, want %q", len(h.csi.Deletes), r.got, tc.want)
			}
		})
	}
}
