package provision

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
)

func withAffinity(terms ...v1.NodeSelectorTerm) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) {
		pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: terms}}
	}
}

func labelTerm(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorTerm {
	return v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

// Under --node-deployment a node's provisioner deletes only the volumes whose PV node affinity matches its
// node; before, every node's instance called DeleteVolume on its own driver for every released PV.
func TestNodeDeploymentDeletesOnlyItsNodesVolumes(t *testing.T) {
	const host = "kubernetes.io/hostname"
	deleted := []string{"delete persistentvolumes", "patch persistentvolumes"}
	for _, tc := range []struct {
		name     string
		nodeName string // --node-deployment's node; "" for a central provisioner
		cached   bool   // this node is in the Node cache (else it is read with a GET)
		pv       *v1.PersistentVolume
		wantAct  []string
		wantDel  int
	}{
		{name: "this node's volume", nodeName: "n1", cached: true, pv: releasedPV(withAffinity(labelTerm(host, v1.NodeSelectorOpIn, "n1"))), wantAct: deleted, wantDel: 1},
		{name: "this node's volume, node read with a GET", nodeName: "n1", pv: releasedPV(withAffinity(labelTerm(host, v1.NodeSelectorOpIn, "n1"))), wantAct: append([]string{"get nodes"}, deleted...), wantDel: 1},
		{name: "another node's volume", nodeName: "n1", cached: true, pv: releasedPV(withAffinity(labelTerm(host, v1.NodeSelectorOpIn, "n2")))},
		{name: "second term matches this node", nodeName: "n1", cached: true, pv: releasedPV(withAffinity(labelTerm(host, v1.NodeSelectorOpIn, "n2"), labelTerm("zone", v1.NodeSelectorOpIn, "a"))), wantAct: deleted, wantDel: 1},
		{name: "one term, one requirement fails", nodeName: "n1", cached: true, pv: releasedPV(withAffinity(v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{
			{Key: host, Operator: v1.NodeSelectorOpIn, Values: []string{"n1"}}, {Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"b"}},
		}}))},
		{name: "metadata.name field", nodeName: "n1", cached: true, pv: releasedPV(withAffinity(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n1"}},
		}})), wantAct: deleted, wantDel: 1},
		{name: "no node affinity: no node's volume", nodeName: "n1", cached: true, pv: releasedPV()},
		{name: "central provisioner deletes any node's volume", pv: releasedPV(withAffinity(labelTerm(host, v1.NodeSelectorOpIn, "n2"))), wantAct: deleted, wantDel: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.NodeName = tc.nodeName
			node, _ := testutil.Node("n1", map[string]string{host: "n1", "zone": "a"})
			objs := []runtime.Object{tc.pv, testutil.Class("fast", nil)}
			h := newHarness(t, cfg, objs...)
			if _, err := h.kube.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.cached {
				h.cache(t, node)
			}
			h.kube.ClearActions()
			if err := h.p.SyncVolume(context.Background(), tc.pv.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			if got := h.actions(); !equal(got, tc.wantAct) {
				t.Errorf("actions %q, want %q", got, tc.wantAct)
			}
			if got := len(h.csi.Deletes); got != tc.wantDel {
				t.Errorf("DeleteVolume called %d times, want %d", got, tc.wantDel)
			}
		})
	}
}

// A claim deleted while another node's provisioner was creating its volume is that node's to clean up: the
// clean-up re-sends CreateVolume, which here would make the volume on this node's driver.
func TestNodeDeploymentCleansUpOnlyItsNodesClaims(t *testing.T) {
	for _, tc := range []struct {
		name        string
		selected    string
		wantCreates int
	}{
		{name: "claim of this node: cleaned up", selected: "n1", wantCreates: 1},
		{name: "claim of another node: left alone", selected: "n2"},
		{name: "intent without a selected node: left alone", selected: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.NodeName = "n1"
			claim := testutil.Claim("ns", "data", uid, "fast", "1Gi", withLegacyIntent, deleting, func(c *v1.PersistentVolumeClaim) {
				if tc.selected != "" {
					c.Annotations[annSelectedNode] = tc.selected
				}
			})
			h := newHarness(t, cfg, claim, testutil.Class("fast", nil))
			if err := h.p.SyncClaim(context.Background(), claim.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			if len(h.csi.Creates) != tc.wantCreates {
				t.Errorf("CreateVolume called %d times, want %d", len(h.csi.Creates), tc.wantCreates)
			}
			if tc.wantCreates == 0 && len(h.actions()) != 0 {
				t.Errorf("another node's claim was written: %q", h.actions())
			}
		})
	}
}

// Under --node-deployment with immediate binding, upstream's node provisioners compete for a claim only when
// their node is in the class's allowedTopologies and their driver reports room for it in a segment the volume
// could be made in for that node; before, every node took claims it could never provision, and the claim failed
// on the node that won the race.
func TestNodeDeploymentImmediateChecksTopologyAndCapacity(t *testing.T) {
	allowed := func(zones ...string) func(*storagev1.StorageClass) {
		return func(c *storagev1.StorageClass) {
			c.AllowedTopologies = []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: "zone", Values: zones}}}}
		}
	}
	for _, tc := range []struct {
		name      string
		class     *storagev1.StorageClass
		noGetCap  bool
		available map[string]int64
		capErr    error
		wantTaken bool
		wantSlow  bool
		wantCalls []string // the zones GetCapacity was asked about
	}{
		{name: "node outside allowedTopologies", class: testutil.Class("fast", nil, allowed("b")), available: map[string]int64{"a": 2 << 30}},
		{name: "node in allowedTopologies with room", class: testutil.Class("fast", nil, allowed("b", "a")), available: map[string]int64{"a": 2 << 30},
			wantTaken: true, wantCalls: []string{"a"}},
		{name: "no room in any segment", class: testutil.Class("fast", nil), available: map[string]int64{"a": 512 << 20}, wantSlow: true, wantCalls: []string{"a", "b"}},
		{name: "room in the second segment", class: testutil.Class("fast", nil), available: map[string]int64{"b": 1 << 30}, wantTaken: true, wantCalls: []string{"a", "b"}},
		{name: "GetCapacity fails: taken", class: testutil.Class("fast", nil), capErr: testutil.Code(codes.Unavailable), wantTaken: true, wantCalls: []string{"a"}},
		{name: "driver without GET_CAPACITY: taken unasked", class: testutil.Class("fast", nil), noGetCap: true, wantTaken: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.NodeName, cfg.NodeDeploymentImmediateBinding = "n1", true
			cfg.Capabilities.Topology, cfg.Capabilities.GetCapacity = true, !tc.noGetCap
			n1, cn1 := testutil.Node("n1", map[string]string{"zone": "a"}, "zone")
			n2, cn2 := testutil.Node("n2", map[string]string{"zone": "b"}, "zone")
			claim := testutil.Claim("ns", "data", uid, "fast", "1Gi")
			h := newHarness(t, cfg, claim, tc.class, n1, cn1, n2, cn2)
			h.csi.Available, h.csi.CapacityErr = tc.available, tc.capErr
			err := h.p.SyncClaim(context.Background(), claim.DeepCopy())
			if (err != nil) != tc.wantSlow || (err != nil && !IsSlow(err)) {
				t.Fatalf("SyncClaim: %v, want a slow retry: %v", err, tc.wantSlow)
			}
			if got := h.claim(t, "ns", "data").Annotations[annSelectedNode]; (got == "n1") != tc.wantTaken {
				t.Errorf("selected-node %q, want taken: %v", got, tc.wantTaken)
			}
			var zones []string
			for _, r := range h.csi.CapacityReqs {
				zones = append(zones, r.GetAccessibleTopology().GetSegments()["zone"])
				if r.Parameters == nil || len(r.VolumeCapabilities) != 1 {
					t.Errorf("GetCapacity request %v is not the one CreateVolume would get", r)
				}
			}
			if !equal(zones, tc.wantCalls) {
				t.Errorf("GetCapacity asked for zones %q, want %q", zones, tc.wantCalls)
			}
			if len(h.csi.Creates) != 0 {
				t.Error("CreateVolume before the claim was taken")
			}
		})
	}
}
