//go:build e2e

package provisioner

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/csimock"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// The in-tree plugin and the CSI driver it migrates to (csi-translation-lib's pair), and the driver's zone key.
const (
	ebsDriverName = "ebs.csi.aws.com"
	ebsInTreeName = "kubernetes.io/aws-ebs"
	ebsZoneKey    = "topology.ebs.csi.aws.com/zone"
)

// TestE2EProvisionerMigration provisions and deletes a claim of a StorageClass that names the in-tree
// kubernetes.io/aws-ebs plugin, against the real kube-controller-manager, whose PV controller no longer provisions
// it and hands it to the CSI driver the plugin migrates to. The mock driver answers as ebs.csi.aws.com. The PV
// must be written in the in-tree form (as upstream's csi-provisioner writes it), the driver must get the class's
// parameters translated, and releasing the claim must delete the volume through the driver.
func TestE2EProvisionerMigration(t *testing.T) {
	ctx := context.Background()
	r := startRig(t, sidecarrig.Options{})
	kube := adminClient(t, r)
	drv, err := csimock.Start(ctx, csimock.Options{Name: ebsDriverName, TopologyKey: ebsZoneKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{ebsZoneKey: "us-east-1a"}}}
	if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	csiNode := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
			Name: ebsDriverName, NodeID: "node-a", TopologyKeys: []string{ebsZoneKey},
		}}},
	}
	if _, err := kube.StorageV1().CSINodes().Create(ctx, csiNode, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sc := storageClass("gp2-in-tree", storagev1.VolumeBindingImmediate, map[string]string{"type": "gp3", "fsType": "xfs", "iopsPerGB": "10"})
	sc.Provisioner = ebsInTreeName
	createClass(t, ctx, kube, sc)
	ns := "e2e-migration"
	createNamespace(t, ctx, kube, ns)
	startProvisioner(t, r, drv.Endpoint())

	pvc := createClaim(t, kube, claim(ns, "data", sc.Name, "1Gi"))
	pv := waitBound(t, kube, pvc)
	got, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("claim annotations from kube-controller-manager: %v", got.Annotations)
	if p := got.Annotations["volume.kubernetes.io/storage-provisioner"]; p != ebsDriverName {
		t.Errorf("claim storage-provisioner %q, want %q (the PV controller names the migrated driver)", p, ebsDriverName)
	}

	vol := driverVolume(t, drv, pv.Name)
	if pv.Spec.CSI != nil || pv.Spec.AWSElasticBlockStore == nil {
		t.Fatalf("PV source %+v, want awsElasticBlockStore and no csi", pv.Spec.PersistentVolumeSource)
	}
	if ebs := pv.Spec.AWSElasticBlockStore; ebs.VolumeID != vol.ID || ebs.FSType != "xfs" {
		t.Errorf("PV awsElasticBlockStore %+v, want volume ID %s and fsType xfs", ebs, vol.ID)
	}
	if by := pv.Annotations["pv.kubernetes.io/provisioned-by"]; by != ebsInTreeName {
		t.Errorf("PV provisioned-by %q, want %q", by, ebsInTreeName)
	}
	if !hasZoneAffinity(pv, "topology.kubernetes.io/zone", "us-east-1a") {
		t.Errorf("PV node affinity %+v, want the in-tree zone key with us-east-1a", pv.Spec.NodeAffinity)
	}
	want := map[string]string{"type": "gp3", "iopsPerGB": "10", "allowautoiopspergbincrease": "true"}
	for k, v := range want {
		if vol.Parameters[k] != v {
			t.Errorf("driver parameter %s = %q, want %q (all: %v)", k, vol.Parameters[k], v, vol.Parameters)
		}
	}
	if _, ok := vol.Parameters["fsType"]; ok {
		t.Errorf("driver got the in-tree fsType parameter untranslated: %v", vol.Parameters)
	}
	// kube-controller-manager marks the in-tree PV as migrated to the driver: the signal it hands deletion over.
	rig.Eventually(t, ctx, 60*time.Second, "PV "+pv.Name+" marked migrated-to "+ebsDriverName, func(ctx context.Context) (bool, error) {
		cur, err := kube.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return err == nil && cur.Annotations["pv.kubernetes.io/migrated-to"] == ebsDriverName, err
	})

	if err := kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, ctx, 60*time.Second, "PV "+pv.Name+" deleted", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if n := countVolumes(drv, pv.Name); n != 0 {
		t.Errorf("driver still holds %d volumes named %s after the PV is gone", n, pv.Name)
	}
	if n := drv.CallsFor(csimock.DeleteVolume, vol.ID); n != 1 {
		t.Errorf("DeleteVolume calls for %s: %d, want 1", vol.ID, n)
	}
}

// hasZoneAffinity reports whether the PV's required node affinity has key with value among its values.
func hasZoneAffinity(pv *v1.PersistentVolume, key, value string) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return false
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == key {
				for _, v := range e.Values {
					if v == value {
						return true
					}
				}
			}
		}
	}
	return false
}
