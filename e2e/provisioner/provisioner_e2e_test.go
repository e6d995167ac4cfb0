//go:build e2e

package provisioner

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/cluster/clustertest"
	"github.com/stowage-csi/stowage/e2e/csimock"
)

// TestE2EProvisioner walks claims through csi-provisioner on a real control plane: Immediate and
// WaitForFirstConsumer claims bound by kube-controller-manager's binder, topology in PV node affinity, a clone,
// deletion, a bad StorageClass, and a provisioner SIGKILLed while CreateVolume is blocked in the driver.
func TestE2EProvisioner(t *testing.T) {
	c := clustertest.Start(t)
	kube := adminClient(t, c)
	kubeconfig := serviceAccountKubeconfig(t, c)
	ctx := context.Background()

	drv, err := csimock.Start(ctx, csimock.Options{Name: driverName, TopologyKey: zoneKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)

	// Two nodes in two zones, with the CSINode objects the kubelet would register.
	for name, zone := range map[string]string{"node-a": "zone-a", "node-b": "zone-b"} {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{zoneKey: zone, "kubernetes.io/hostname": name}}}
		if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		csiNode := &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
				Name: driverName, NodeID: name, TopologyKeys: []string{zoneKey},
			}}},
		}
		if _, err := kube.StorageV1().CSINodes().Create(ctx, csiNode, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sc := range []*storagev1.StorageClass{
		storageClass("immediate", storagev1.VolumeBindingImmediate, map[string]string{"type": "fast", "csi.storage.k8s.io/fstype": "ext4"}),
		storageClass("late", storagev1.VolumeBindingWaitForFirstConsumer, nil),
		storageClass("typo", storagev1.VolumeBindingImmediate, map[string]string{"csi.storage.k8s.io/fs-type": "ext4"}),
	} {
		if _, err := kube.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ns := "e2e-provisioner"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	prov := startProvisioner(t, kubeconfig, drv.Endpoint(), "--extra-create-metadata",
		"--enable-capacity", "--capacity-ownerref-level=-1", "--capacity-poll-interval=2s")

	t.Run("immediate claim is bound with topology in node affinity", func(t *testing.T) {
		pvc := createClaim(t, kube, claim(ns, "immediate", "immediate", "1Gi"))
		pv := waitBound(t, kube, pvc)
		if !slices.Contains(pv.Finalizers, pvFinalizer) || pv.Annotations["pv.kubernetes.io/provisioned-by"] != driverName {
			t.Errorf("PV finalizers %v annotations %v", pv.Finalizers, pv.Annotations)
		}
		if pv.Spec.CSI == nil || pv.Spec.CSI.FSType != "ext4" || pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete {
			t.Errorf("PV spec %+v", pv.Spec)
		}
		if z := affinityZones(pv); len(z) != 1 || (z[0] != "zone-a" && z[0] != "zone-b") {
			t.Errorf("node affinity zones %v, want one of the nodes' zones", z)
		}
		vol := driverVolume(t, drv, pv.Name)
		if vol.Parameters["type"] != "fast" || vol.Parameters["csi.storage.k8s.io/pvc/name"] != "immediate" {
			t.Errorf("driver got parameters %v", vol.Parameters)
		}
		if _, ok := vol.Parameters["csi.storage.k8s.io/fstype"]; ok {
			t.Errorf("csi.storage.k8s.io/fstype reached the driver")
		}
		waitNoIntent(t, kube, pvc)
	})

	t.Run("WaitForFirstConsumer claim is provisioned in the selected node's zone", func(t *testing.T) {
		pvc := createClaim(t, kube, claim(ns, "late", "late", "1Gi"))
		time.Sleep(time.Second)
		if n := countVolumes(drv, "pvc-"+string(pvc.UID)); n != 0 {
			t.Fatalf("volume created before a node was selected")
		}
		// What the scheduler does once a pod using the claim is placed on node-b.
		patch := []byte(`{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":"node-b"}}}`)
		if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, pvc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		pv := waitBound(t, kube, pvc)
		if z := affinityZones(pv); len(z) != 1 || z[0] != "zone-b" {
			t.Errorf("node affinity zones %v, want [zone-b]", z)
		}
		if vol := driverVolume(t, drv, pv.Name); vol.Topology[zoneKey] != "zone-b" {
			t.Errorf("driver placed the volume in %v", vol.Topology)
		}
	})

	t.Run("clone of a bound claim", func(t *testing.T) {
		src, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "immediate", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		clone := claim(ns, "clone", "immediate", "1Gi")
		clone.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "immediate"}
		clone = createClaim(t, kube, clone)
		pv := waitBound(t, kube, clone)
		srcPV, err := kube.CoreV1().PersistentVolumes().Get(ctx, src.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if vol := driverVolume(t, drv, pv.Name); vol.ContentSource != "volume:"+srcPV.Spec.CSI.VolumeHandle {
			t.Errorf("clone's content source %q, want volume:%s", vol.ContentSource, srcPV.Spec.CSI.VolumeHandle)
		}
		waitFor(t, 30*time.Second, "cloning-protection finalizer released", func() (bool, error) {
			s, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "immediate", metav1.GetOptions{})
			return err == nil && !slices.Contains(s.Finalizers, "provisioner.storage.kubernetes.io/cloning-protection"), err
		})
	})

	t.Run("deleted claims lose their PV and volume", func(t *testing.T) {
		for _, pv := range deleteClaimsWaitPVsGone(t, kube, ns, "clone", "immediate", "late") {
			if n := countVolumes(drv, pv); n != 0 {
				t.Errorf("driver still holds volume %s", pv)
			}
		}
		if got := drv.Calls(csimock.DeleteVolume); got != 3 {
			t.Errorf("DeleteVolume called %d times for 3 volumes", got)
		}
	})

	t.Run("bad StorageClass parameter: an Event naming it, no CreateVolume", func(t *testing.T) {
		before := drv.Calls(csimock.CreateVolume)
		pvc := createClaim(t, kube, claim(ns, "typo", "typo", "1Gi"))
		waitFor(t, 30*time.Second, "ProvisioningFailed event naming the key", func() (bool, error) {
			evs, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=typo"})
			if err != nil {
				return false, err
			}
			for _, e := range evs.Items {
				if e.Reason == "ProvisioningFailed" && strings.Contains(e.Message, "csi.storage.k8s.io/fs-type") {
					return true, nil
				}
			}
			return false, nil
		})
		if got := drv.Calls(csimock.CreateVolume); got != before {
			t.Errorf("CreateVolume called %d times for a claim with a bad class", got-before)
		}
		if got, _ := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{}); got != nil && slices.Contains(got.Finalizers, intentKey) {
			t.Errorf("a claim that never reached CreateVolume got the intent finalizer")
		}
		if err := kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("CSIStorageCapacity per zone for the WaitForFirstConsumer class", func(t *testing.T) {
		waitFor(t, 30*time.Second, "two CSIStorageCapacity objects", func() (bool, error) {
			list, err := kube.StorageV1().CSIStorageCapacities(namespace).List(ctx, metav1.ListOptions{
				LabelSelector: "csi.storage.k8s.io/drivername=" + driverName + ",csi.storage.k8s.io/managed-by=external-provisioner",
			})
			if err != nil {
				return false, err
			}
			zones := map[string]bool{}
			for _, o := range list.Items {
				if o.StorageClassName != "late" || o.Capacity == nil || o.Capacity.Value() != 100<<30 || o.NodeTopology == nil {
					return false, nil
				}
				zones[o.NodeTopology.MatchLabels[zoneKey]] = true
			}
			return len(list.Items) == 2 && zones["zone-a"] && zones["zone-b"], nil
		})
	})

	t.Run("metrics and leader election health", func(t *testing.T) {
		body := httpGet(t, prov.httpURL+"/metrics")
		for _, m := range []string{
			"controller_persistentvolumeclaim_provision_total", "controller_persistentvolume_delete_total",
			"csi_sidecar_operations_seconds", "workqueue_adds_total", "leader_election_master_status",
			"csistoragecapacities_desired_goal",
		} {
			if !strings.Contains(body, m) {
				t.Errorf("/metrics lacks %s", m)
			}
		}
		if got := httpGet(t, prov.httpURL+"/healthz/leader-election"); got != "ok" {
			t.Errorf("/healthz/leader-election = %q", got)
		}
	})

	t.Run("provisioner killed during CreateVolume, claim deleted: the volume is cleaned up", func(t *testing.T) {
		blocked := make(chan string, 1)
		release := make(chan struct{})
		drv.SetBeforeCall(func(ctx context.Context, method string, req any) error {
			if method != csimock.CreateVolume {
				return nil
			}
			if r, ok := req.(*csi.CreateVolumeRequest); ok && r.Parameters["csi.storage.k8s.io/pvc/name"] == "doomed" {
				select {
				case blocked <- r.Name:
				default:
				}
				// Hold the call until the provisioner is gone; then let the driver make the volume anyway,
				// as a real backend finishes work whose caller vanished.
				select {
				case <-ctx.Done():
				case <-release:
				}
			}
			return nil
		})
		t.Cleanup(func() { drv.SetBeforeCall(nil) })

		pvc := createClaim(t, kube, claim(ns, "doomed", "immediate", "1Gi"))
		var volName string
		select {
		case volName = <-blocked:
		case <-time.After(60 * time.Second):
			t.Fatal("CreateVolume never reached the driver")
		}
		got, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(got.Finalizers, intentKey) || got.Annotations[intentKey] != volName {
			t.Fatalf("intent not persisted before CreateVolume: finalizers %v annotation %q", got.Finalizers, got.Annotations[intentKey])
		}

		prov.kill()
		waitFor(t, 30*time.Second, "the abandoned call to create the volume in the driver", func() (bool, error) {
			return countVolumes(drv, volName) == 1, nil
		})
		drv.SetBeforeCall(nil)
		if err := kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The finalizer holds the claim: nobody else knows the volume exists.
		time.Sleep(2 * time.Second)
		if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{}); err != nil {
			t.Fatalf("claim gone while its volume may exist: %v", err)
		}

		deletesBefore := drv.Calls(csimock.DeleteVolume)
		startProvisioner(t, kubeconfig, drv.Endpoint(), "--extra-create-metadata")
		waitFor(t, 90*time.Second, "claim gone after the new provisioner cleaned up", func() (bool, error) {
			_, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if n := countVolumes(drv, volName); n != 0 {
			t.Errorf("volume %s leaked", volName)
		}
		if got := drv.Calls(csimock.DeleteVolume) - deletesBefore; got != 1 {
			t.Errorf("DeleteVolume called %d times, want 1", got)
		}
		if _, err := kube.CoreV1().PersistentVolumes().Get(ctx, volName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("PV %s exists for a deleted claim (err %v)", volName, err)
		}
		close(release)
	})

	t.Run("CreateVolume times out, claim deleted: the volume made after the timeout is deleted", func(t *testing.T) {
		// The previous subtest's provisioner is gone (SIGKILL at its end); this one times out calls after 2s.
		startProvisioner(t, kubeconfig, drv.Endpoint(), "--extra-create-metadata", "--timeout=2s")
		timedOut := make(chan struct{})
		drv.SetBeforeCall(func(ctx context.Context, method string, req any) error {
			if r, ok := req.(*csi.CreateVolumeRequest); ok && method == csimock.CreateVolume && r.Parameters["csi.storage.k8s.io/pvc/name"] == "slow" {
				// Outlast the caller's timeout, then make the volume anyway.
				<-ctx.Done()
				select {
				case timedOut <- struct{}{}:
				default:
				}
			}
			return nil
		})
		t.Cleanup(func() { drv.SetBeforeCall(nil) })
		pvc := createClaim(t, kube, claim(ns, "slow", "immediate", "1Gi"))
		select {
		case <-timedOut:
		case <-time.After(60 * time.Second):
			t.Fatal("CreateVolume never timed out")
		}
		// The hook stays until the claim is deleted: every retry times out the same way, so the claim cannot
		// get bound first.
		volName := "pvc-" + string(pvc.UID)
		waitFor(t, 30*time.Second, "the timed-out call's volume in the driver", func() (bool, error) {
			return countVolumes(drv, volName) == 1, nil
		})
		if err := kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		drv.SetBeforeCall(nil)
		waitFor(t, 90*time.Second, "claim gone", func() (bool, error) {
			_, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if n := countVolumes(drv, volName); n != 0 {
			t.Errorf("volume %s leaked after a timeout and a deletion", volName)
		}
		if _, err := kube.CoreV1().PersistentVolumes().Get(ctx, volName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("PV %s exists for a deleted claim (err %v)", volName, err)
		}
	})

	t.Run("nothing left in the driver", func(t *testing.T) {
		if vols := drv.Volumes(); len(vols) != 0 {
			t.Errorf("driver holds %d volumes after every claim was deleted: %+v", len(vols), vols)
		}
	})
}

func createClaim(t *testing.T, kube kubernetes.Interface, pvc *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	t.Helper()
	out, err := kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(context.Background(), pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitBound waits until kube-controller-manager bound the claim and returns its PV.
func waitBound(t *testing.T, kube kubernetes.Interface, pvc *v1.PersistentVolumeClaim) *v1.PersistentVolume {
	t.Helper()
	ctx := context.Background()
	var pvName string
	waitFor(t, 60*time.Second, "claim "+pvc.Name+" bound", func() (bool, error) {
		got, err := kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pvName = got.Spec.VolumeName
		return got.Status.Phase == v1.ClaimBound, nil
	})
	pv, err := kube.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		t.Errorf("PV %s claimRef %v, want claim %s", pv.Name, pv.Spec.ClaimRef, pvc.UID)
	}
	return pv
}

func waitNoIntent(t *testing.T, kube kubernetes.Interface, pvc *v1.PersistentVolumeClaim) {
	t.Helper()
	waitFor(t, 30*time.Second, "intent released", func() (bool, error) {
		got, err := kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(context.Background(), pvc.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, ann := got.Annotations[intentKey]
		return !slices.Contains(got.Finalizers, intentKey) && !ann, nil
	})
}

func affinityZones(pv *v1.PersistentVolume) []string {
	var out []string
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == zoneKey {
				out = append(out, e.Values...)
			}
		}
	}
	return out
}

func driverVolume(t *testing.T, drv *csimock.Driver, name string) csimock.Volume {
	t.Helper()
	for _, v := range drv.Volumes() {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("driver has no volume %s", name)
	return csimock.Volume{}
}

func countVolumes(drv *csimock.Driver, name string) int {
	n := 0
	for _, v := range drv.Volumes() {
		if v.Name == name {
			n++
		}
	}
	return n
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// deleteClaimsWaitPVsGone deletes bound claims, waits until each one's PV is gone (Delete reclaim policy)
// and returns the PVs' names.
func deleteClaimsWaitPVsGone(t *testing.T, kube kubernetes.Interface, ns string, names ...string) []string {
	t.Helper()
	ctx := context.Background()
	var pvs []string
	for _, name := range names {
		pvc, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "PV "+pvc.Spec.VolumeName+" gone", func() (bool, error) {
			_, err := kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		pvs = append(pvs, pvc.Spec.VolumeName)
	}
	return pvs
}
