//go:build e2e

package provisioner

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/csimock"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// TestE2EProvisionerNodeDeploymentImmediate runs one csi-provisioner per node (--node-deployment, each with
// its own node's driver) as upstream's node-local drivers deploy it. Node A's instance, alone at first, leaves
// the immediate claims it cannot serve to others, as upstream's does: one whose class allows only zone-b, and
// one larger than its driver's capacity; it takes a claim it can serve, which shows it has seen the others.
// Node B's instance then takes both. Each publishes CSIStorageCapacity for its own zone only.
func TestE2EProvisionerNodeDeploymentImmediate(t *testing.T) {
	e := setUpProvisionerTest(t)
	ctx := context.Background()
	zoneB := storageClass("zone-b-only", storagev1.VolumeBindingImmediate, nil)
	zoneB.AllowedTopologies = []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: zoneKey, Values: []string{"zone-b"}}}}}
	createClass(t, ctx, e.kube, zoneB)

	start := func(node, zone string, capacity int64) {
		drv, err := csimock.Start(ctx, csimock.Options{Name: driverName, TopologyKey: zoneKey, NodeID: node, NodeZone: zone, Capacity: capacity})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(drv.Stop)
		e.r.Start(t, sidecarrig.Provisioner(), sidecarrig.Run{Name: "csi-provisioner-" + node, Endpoint: drv.Endpoint(),
			Env: []string{"NODE_NAME=" + node},
			Args: []string{"--node-deployment", "--worker-threads=1", "--retry-interval-start=200ms", "--retry-interval-max=2s",
				"--enable-capacity", "--capacity-ownerref-level=-1", "--http-endpoint=" + rig.FreeAddr(t), "-v=4"}})
	}
	start("node-a", "zone-a", 10<<30)
	waitCapacity(t, e, "external-provisioner-node-a", map[string]int64{"zone-a": 10}, "node-a's CSIStorageCapacity")

	allowed := createClaim(t, e.kube, claim(e.ns, "allowed-in-b", "zone-b-only", "1Gi"))
	big := createClaim(t, e.kube, claim(e.ns, "bigger-than-a", "immediate", "50Gi"))
	small := createClaim(t, e.kube, claim(e.ns, "fits-a", "immediate", "1Gi"))
	if z := pvZone(waitBound(t, e.kube, small)); z != "zone-a" {
		t.Errorf("claim node A can serve: volume in %q, want zone-a", z)
	}
	// Node A's one worker handled both earlier claims before the later one it took; neither is its.
	for _, c := range []*v1.PersistentVolumeClaim{allowed, big} {
		got, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n := got.Annotations["volume.kubernetes.io/selected-node"]; n != "" {
			t.Errorf("claim %s taken by %s, which cannot serve it", c.Name, n)
		}
	}

	start("node-b", "zone-b", 100<<30)
	waitCapacity(t, e, "external-provisioner-node-b", map[string]int64{"zone-b": 100}, "node-b's CSIStorageCapacity")
	for _, c := range []*v1.PersistentVolumeClaim{allowed, big} {
		if z := pvZone(waitBound(t, e.kube, c)); z != "zone-b" {
			t.Errorf("claim %s: volume in %q, want zone-b", c.Name, z)
		}
	}
	deleteClaimsWaitPVsGone(t, e.kube, e.ns, allowed.Name, big.Name, small.Name)
}

func pvZone(pv *v1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, r := range term.MatchExpressions {
			if r.Key == zoneKey && len(r.Values) == 1 {
				return r.Values[0]
			}
		}
	}
	return ""
}
