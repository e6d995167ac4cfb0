//go:build e2e

package provisioner

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// TestE2EProvisionerCapacityRefreshedAfterVolumeChange: with an hour between capacity polls, the
// CSIStorageCapacity objects of a new volume's zone follow the driver's answer as soon as CreateVolume made it,
// and again once DeleteVolume removed it, as upstream's provisioner refreshes them; the other zone's object
// keeps the answer of the first pass. Before, only the poll refreshed them, so the scheduler read capacity a
// volume had already used up for up to --capacity-poll-interval.
func TestE2EProvisionerCapacityRefreshedAfterVolumeChange(t *testing.T) {
	e := setUpProvisionerTest(t)
	startProvisioner(t, e.r, e.drv.Endpoint(), "--worker-threads=1",
		"--enable-capacity", "--capacity-ownerref-level=-1", "--capacity-poll-interval=1h")
	waitCapacity(t, e, "external-provisioner", map[string]int64{"zone-a": 100, "zone-b": 100}, "the first pass")

	e.drv.SetCapacity(42 << 30)
	pv := waitBound(t, e.kube, createClaim(t, e.kube, claim(e.ns, "refresh", "immediate", "1Gi")))
	zone := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0]
	other := map[string]string{"zone-a": "zone-b", "zone-b": "zone-a"}[zone]
	waitCapacity(t, e, "external-provisioner", map[string]int64{zone: 42, other: 100}, "the refresh after CreateVolume")

	e.drv.SetCapacity(50 << 30)
	deleteClaimsWaitPVsGone(t, e.kube, e.ns, "refresh")
	waitCapacity(t, e, "external-provisioner", map[string]int64{zone: 50, other: 100}, "the refresh after DeleteVolume")
}

// waitCapacity waits until the CSIStorageCapacity objects of the WaitForFirstConsumer class managed by managedBy
// (a node's provisioner: external-provisioner-<node>) hold exactly want (GiB per zone).
func waitCapacity(t *testing.T, e *provisionerTest, managedBy string, want map[string]int64, what string) {
	t.Helper()
	rig.Eventually(t, context.Background(), 30*time.Second, what, func(ctx context.Context) (bool, error) {
		list, err := e.kube.StorageV1().CSIStorageCapacities(sidecarrig.Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: "csi.storage.k8s.io/drivername=" + driverName + ",csi.storage.k8s.io/managed-by=" + managedBy,
		})
		if err != nil {
			return false, err
		}
		got := map[string]int64{}
		for _, o := range list.Items {
			if o.StorageClassName == "late" && o.NodeTopology != nil && o.Capacity != nil {
				got[o.NodeTopology.MatchLabels[zoneKey]] = o.Capacity.Value() >> 30
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return false, fmt.Errorf("capacity per zone %v, want %v", got, want)
		}
		return true, nil
	})
}
