package provision

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
)

// A claim whose selected Node was deleted goes back to the scheduler (selected-node dropped by an Update of the
// claim, as upstream), instead of failing on the missing Node forever. A Node only the cache has not seen yet is
// not taken for gone.
func TestSelectedNodeGone(t *testing.T) {
	for _, tc := range []struct {
		name       string
		intent     bool
		nodeCached bool // the Node is in the lister
		nodeInAPI  bool // the Node is in the API server only (created after the cache's last event)
		// nodeDeployment runs the provisioner as n1's (--node-deployment), the node the claim selected.
		nodeDeployment bool
		wantAct        []string
		wantGone       bool
	}{
		{name: "node deleted: selected-node dropped", wantAct: []string{"get nodes", "update persistentvolumeclaims"}, wantGone: true},
		{name: "node deleted, journaled: selected-node dropped, intent kept", intent: true, wantAct: []string{"get nodes", "update persistentvolumeclaims"}, wantGone: true},
		{name: "node in the cache: provisioned", nodeCached: true, wantAct: []string{"update leases", "create persistentvolumes"}},
		{name: "node not cached yet but in the API: provisioned", nodeInAPI: true, wantAct: []string{"get nodes", "update leases", "create persistentvolumes"}},
		{name: "node deployment: its own node is not checked", nodeDeployment: true, wantAct: []string{"update leases", "create persistentvolumes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			class := testutil.Class("late", nil, testutil.WaitForFirstConsumer)
			claim := testutil.Claim("ns", "data", uid, "late", "1Gi", func(c *v1.PersistentVolumeClaim) { c.Annotations[annSelectedNode] = "n1" })
			if tc.intent {
				withLegacyIntent(claim)
			}
			objs := []runtime.Object{class, claim}
			if tc.nodeCached {
				objs = append(objs, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
			}
			cfg := defaultConfig()
			if tc.nodeDeployment {
				cfg.NodeName = "n1"
			}
			h := newHarness(t, cfg, objs...)
			if tc.nodeInAPI {
				if _, err := h.kube.CoreV1().Nodes().Create(context.Background(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				h.kube.ClearActions()
			}
			if err := h.p.SyncClaim(context.Background(), claim.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			if got := h.actions(); !equal(got, tc.wantAct) {
				t.Errorf("actions %q, want %q", got, tc.wantAct)
			}
			got := h.claim(t, "ns", "data")
			_, selected := got.Annotations[annSelectedNode]
			if !tc.wantGone {
				if !selected || len(h.csi.Creates) != 1 {
					t.Errorf("selected-node kept %v, CreateVolume calls %d; want kept and one call", selected, len(h.csi.Creates))
				}
				return
			}
			if selected || len(h.csi.Creates) != 0 {
				t.Errorf("selected-node kept %v, CreateVolume calls %d; want it dropped and no call", selected, len(h.csi.Creates))
			}
			if hasLegacyIntent(got) != tc.intent || (got.Annotations[IntentKey] != "") != tc.intent {
				t.Errorf("intent %v after the reschedule, want %v", hasLegacyIntent(got), tc.intent)
			}
			if ev := h.events(); !hasEvent(ev, "Warning", ReasonProvisioningFailed, `selected node "n1" no longer exists`) {
				t.Errorf("events %q, want a Warning naming the gone node", ev)
			}
		})
	}
}
