//go:build e2e

package provisioner

import (
	"context"
	"fmt"
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

	"github.com/stowage-csi/stowage/e2e/csimock"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// provisionerTest is the setting TestE2EProvisioner's subtests share: one control plane with an audit log of
// the writes to claims and PVs, two nodes in two zones, the StorageClasses, and a running provisioner.
type provisionerTest struct {
	setting
	audit *rig.AuditLog
	// prov is the shared provisioner, with sharedArgs; owner is the test it runs for.
	prov  *process
	owner *testing.T
}

// TestE2EProvisioner walks claims through csi-provisioner on a real control plane: Immediate and
// WaitForFirstConsumer claims bound by kube-controller-manager's binder, topology in PV node affinity, a clone,
// deletion, a bad StorageClass, and a provisioner SIGKILLed while CreateVolume is blocked in the driver. Each
// subtest stands alone (-run 'TestE2EProvisioner/<name>'): it makes the claims it checks and finds the shared
// provisioner running; run in order, the deletion and the write checks also cover what the earlier ones left.
func TestE2EProvisioner(t *testing.T) {
	e := startProvisionerTest(t)
	t.Run("immediate claim is bound with topology in node affinity", func(t *testing.T) { testImmediateClaim(t, e) })
	t.Run("WaitForFirstConsumer claim is provisioned in the selected node's zone, not before", func(t *testing.T) { testLateClaim(t, e) })
	t.Run("clone of a bound claim", func(t *testing.T) { testClone(t, e) })
	t.Run("claim naming a VolumeAttributesClass, read with get only", func(t *testing.T) { testAttributesClass(t, e) })
	t.Run("deleted claims lose their PV and volume", func(t *testing.T) { testDeleteClaims(t, e) })
	t.Run("bad StorageClass parameter: an Event naming it, no CreateVolume", func(t *testing.T) { testBadClass(t, e) })
	t.Run("CSIStorageCapacity per zone for the WaitForFirstConsumer class", func(t *testing.T) { testCapacity(t, e) })
	t.Run("metrics and leader election health", func(t *testing.T) { testMetrics(t, e) })
	t.Run("provisioner killed during CreateVolume, claim deleted: the volume is cleaned up", func(t *testing.T) { testKilledDuringCreate(t, e) })
	t.Run("CreateVolume times out, claim deleted: the volume made after the timeout is deleted", func(t *testing.T) { testCreateTimeout(t, e) })
	t.Run("claim writes are updates, none refused: upstream's RBAC grants update, not patch", func(t *testing.T) { testWriteVerbs(t, e) })
	t.Run("nothing left in the driver", func(t *testing.T) {
		if vols := e.drv.Volumes(); len(vols) != 0 {
			t.Errorf("driver holds %d volumes after every claim was deleted: %+v", len(vols), vols)
		}
	})
}

// setUpProvisionerTest starts the control plane and the mock driver, and creates the nodes, StorageClasses
// and namespace the subtests use.
func setUpProvisionerTest(t *testing.T) *provisionerTest {
	ctx := context.Background()
	r := startRig(t, sidecarrig.Options{Audit: []string{"/persistentvolumeclaims", "/persistentvolumes", "/events", "coordination.k8s.io/leases"}})
	e := &provisionerTest{setting: setting{r: r, kube: adminClient(t, r), ns: "e2e-provisioner"}, audit: r.Audit}
	var err error
	// csimock's default capabilities plus MODIFY_VOLUME, which claims naming a VolumeAttributesClass need.
	e.drv, err = csimock.Start(ctx, csimock.Options{Name: driverName, TopologyKey: zoneKey, ControllerCaps: []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME, csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES, csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY, csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME, csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.ControllerServiceCapability_RPC_MODIFY_VOLUME,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.drv.Stop)

	// Two nodes in two zones, with the CSINode objects the kubelet would register.
	for name, zone := range map[string]string{"node-a": "zone-a", "node-b": "zone-b"} {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{zoneKey: zone, "kubernetes.io/hostname": name}}}
		if _, err := e.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		csiNode := &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
				Name: driverName, NodeID: name, TopologyKeys: []string{zoneKey},
			}}},
		}
		if _, err := e.kube.StorageV1().CSINodes().Create(ctx, csiNode, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sc := range []*storagev1.StorageClass{
		storageClass("immediate", storagev1.VolumeBindingImmediate, map[string]string{"type": "fast", "csi.storage.k8s.io/fstype": "ext4"}),
		storageClass("late", storagev1.VolumeBindingWaitForFirstConsumer, nil),
		storageClass("typo", storagev1.VolumeBindingImmediate, map[string]string{"csi.storage.k8s.io/fs-type": "ext4"}),
	} {
		createClass(t, ctx, e.kube, sc)
	}
	createNamespace(t, ctx, e.kube, e.ns)
	grantCapacity(t, ctx, e.kube)
	return e
}

// startProvisionerTest sets up as setUpProvisionerTest does and starts the shared csi-provisioner.
func startProvisionerTest(t *testing.T) *provisionerTest {
	e := setUpProvisionerTest(t)
	e.owner = t
	e.prov = startProvisioner(t, e.r, e.drv.Endpoint(), sharedArgs()...)
	return e
}

// sharedArgs are the shared provisioner's flags. One worker: claims are handled one at a time in the order
// they were queued, so a sentinel claim provisioned after the one under test shows the provisioner has done
// all it would do for the latter.
func sharedArgs() []string {
	return []string{"--extra-create-metadata", "--worker-threads=1",
		"--enable-capacity", "--capacity-ownerref-level=-1", "--capacity-poll-interval=2s"}
}

// stopShared kills the shared provisioner for the rest of the subtest t, which runs its own; when t ends, a
// new shared one starts, so the next subtest finds one running whatever ran before it.
func (e *provisionerTest) stopShared(t *testing.T) {
	e.prov.kill()
	// Registered before the subtest starts its own provisioner, so it runs after that one is killed.
	t.Cleanup(func() {
		run, addr := provisionerRun(t, "", e.drv.Endpoint(), sharedArgs())
		if p := e.r.StartAfter(t, e.owner, sidecarrig.Provisioner(), run); p != nil {
			e.prov = &process{Process: p, httpURL: "http://" + addr}
		}
	})
}

func testImmediateClaim(t *testing.T, e *provisionerTest) {
	pvc := createClaim(t, e.kube, claim(e.ns, "immediate", "immediate", "1Gi"))
	pv := waitBound(t, e.kube, pvc)
	if !slices.Contains(pv.Finalizers, pvFinalizer) || pv.Annotations["pv.kubernetes.io/provisioned-by"] != driverName {
		t.Errorf("PV finalizers %v annotations %v", pv.Finalizers, pv.Annotations)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.FSType != "ext4" || pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete {
		t.Errorf("PV spec %+v", pv.Spec)
	}
	if z := affinityZones(pv); len(z) != 1 || (z[0] != "zone-a" && z[0] != "zone-b") {
		t.Errorf("node affinity zones %v, want one of the nodes' zones", z)
	}
	vol := driverVolume(t, e.drv, pv.Name)
	if vol.Parameters["type"] != "fast" || vol.Parameters["csi.storage.k8s.io/pvc/name"] != "immediate" {
		t.Errorf("driver got parameters %v", vol.Parameters)
	}
	if _, ok := vol.Parameters["csi.storage.k8s.io/fstype"]; ok {
		t.Errorf("csi.storage.k8s.io/fstype reached the driver")
	}
	waitNoIntent(t, e.kube, pvc)
}

// testLateClaim checks a WaitForFirstConsumer claim is left alone until a node is selected, then provisioned
// in that node's zone.
func testLateClaim(t *testing.T, e *provisionerTest) {
	ctx := context.Background()
	before := len(e.audit.MustWrites(t))
	pvc := createClaim(t, e.kube, claim(e.ns, "late", "late", "1Gi"))
	// The binder has seen the claim and decided to wait for a consumer.
	waitEvent(t, e.kube, e.ns, pvc.Name, v1.EventTypeNormal, "WaitForFirstConsumer", "")

	// The sentinel: an Immediate claim created after the late one. Once the provisioner made its PV, it had
	// handled the late claim, which was queued first.
	sentinel := waitBound(t, e.kube, createClaim(t, e.kube, claim(e.ns, "late-sentinel", "immediate", "1Gi")))
	writes := e.audit.WaitFor(t, ctx, time.Minute, "csi-provisioner's create of PV "+sentinel.Name, func(w rig.AuditWrite) bool {
		return w.User == provisionerUser && w.Verb == "create" && w.Resource == "persistentvolumes" && w.Name == sentinel.Name
	})
	if got := rig.Filter(writes[before:], func(w rig.AuditWrite) bool {
		return w.User == provisionerUser && w.Name == pvc.Name && strings.HasPrefix(w.Resource, "persistentvolumeclaims")
	}); len(got) != 0 {
		t.Errorf("csi-provisioner wrote the claim before a node was selected: %q", rig.Strings(got))
	}
	if n := countVolumes(e.drv, "pvc-"+string(pvc.UID)); n != 0 {
		t.Fatalf("volume created before a node was selected")
	}

	// What the scheduler does once a pod using the claim is placed on node-b.
	patch := []byte(`{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":"node-b"}}}`)
	if _, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Patch(ctx, pvc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	pv := waitBound(t, e.kube, pvc)
	if z := affinityZones(pv); len(z) != 1 || z[0] != "zone-b" {
		t.Errorf("node affinity zones %v, want [zone-b]", z)
	}
	if vol := driverVolume(t, e.drv, pv.Name); vol.Topology[zoneKey] != "zone-b" {
		t.Errorf("driver placed the volume in %v", vol.Topology)
	}
}

// cloneSource is the claim testClone clones: the only claim csi-provisioner writes (its cloning-protection
// finalizer).
const cloneSource = "clone-source"

func testClone(t *testing.T, e *provisionerTest) {
	ctx := context.Background()
	src := createClaim(t, e.kube, claim(e.ns, cloneSource, "immediate", "1Gi"))
	srcPV := waitBound(t, e.kube, src)
	clone := claim(e.ns, "clone", "immediate", "1Gi")
	clone.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: cloneSource}
	clone = createClaim(t, e.kube, clone)
	pv := waitBound(t, e.kube, clone)
	if vol := driverVolume(t, e.drv, pv.Name); vol.ContentSource != "volume:"+srcPV.Spec.CSI.VolumeHandle {
		t.Errorf("clone's content source %q, want volume:%s", vol.ContentSource, srcPV.Spec.CSI.VolumeHandle)
	}
	rig.Eventually(t, ctx, 30*time.Second, "cloning-protection finalizer released", func(ctx context.Context) (bool, error) {
		s, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, cloneSource, metav1.GetOptions{})
		return err == nil && !slices.Contains(s.Finalizers, "provisioner.storage.kubernetes.io/cloning-protection"), err
	})
}

// testDeleteClaims deletes a claim of its own and every other bound claim the subtests before it left.
func testDeleteClaims(t *testing.T, e *provisionerTest) {
	waitBound(t, e.kube, createClaim(t, e.kube, claim(e.ns, "deleted", "immediate", "1Gi")))
	before := e.drv.Calls(csimock.DeleteVolume)
	pvs := deleteClaimsWaitPVsGone(t, e.kube, e.ns, boundClaims(t, e.kube, e.ns)...)
	for _, pv := range pvs {
		if n := countVolumes(e.drv, pv.Name); n != 0 {
			t.Errorf("driver still holds volume %s", pv.Name)
		}
		if n := e.drv.CallsFor(csimock.DeleteVolume, pv.Spec.CSI.VolumeHandle); n != 1 {
			t.Errorf("DeleteVolume called %d times for volume %s, want once", n, pv.Spec.CSI.VolumeHandle)
		}
	}
	if got := e.drv.Calls(csimock.DeleteVolume) - before; got != len(pvs) {
		t.Errorf("DeleteVolume called %d times for %d volumes", got, len(pvs))
	}
}

func testBadClass(t *testing.T, e *provisionerTest) {
	ctx := context.Background()
	before := e.drv.Calls(csimock.CreateVolume)
	pvc := createClaim(t, e.kube, claim(e.ns, "typo", "typo", "1Gi"))
	waitEvent(t, e.kube, e.ns, "typo", v1.EventTypeWarning, "ProvisioningFailed", "csi.storage.k8s.io/fs-type")
	if got := e.drv.Calls(csimock.CreateVolume); got != before {
		t.Errorf("CreateVolume called %d times for a claim with a bad class", got-before)
	}
	if got, _ := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, pvc.Name, metav1.GetOptions{}); got != nil && slices.Contains(got.Finalizers, intentKey) {
		t.Errorf("a claim that never reached CreateVolume got the intent finalizer")
	}
	if recordHas(t, e.kube, pvc.UID, "pvc-"+string(pvc.UID)) {
		t.Errorf("a claim that never reached CreateVolume got a journal entry")
	}
	if err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func testCapacity(t *testing.T, e *provisionerTest) {
	rig.Eventually(t, context.Background(), 30*time.Second, "two CSIStorageCapacity objects", func(ctx context.Context) (bool, error) {
		list, err := e.kube.StorageV1().CSIStorageCapacities(sidecarrig.Namespace).List(ctx, metav1.ListOptions{
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
}

// testMetrics provisions and deletes a claim, so that each counter has a sample, and reads the metrics.
func testMetrics(t *testing.T, e *provisionerTest) {
	waitBound(t, e.kube, createClaim(t, e.kube, claim(e.ns, "metrics", "immediate", "1Gi")))
	deleteClaimsWaitPVsGone(t, e.kube, e.ns, "metrics")
	body := httpGet(t, e.prov.httpURL+"/metrics")
	for _, m := range []string{
		"controller_persistentvolumeclaim_provision_total", "controller_persistentvolume_delete_total",
		"csi_sidecar_operations_seconds", "workqueue_adds_total", "leader_election_master_status",
		"csistoragecapacities_desired_goal",
	} {
		if !strings.Contains(body, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	if got := httpGet(t, e.prov.httpURL+"/healthz/leader-election"); got != "ok" {
		t.Errorf("/healthz/leader-election = %q", got)
	}
}

// testKilledDuringCreate kills the provisioner while CreateVolume for a claim is blocked in the driver, lets
// the driver make the volume anyway, deletes the claim (which goes at once: nothing of the provisioner's holds
// it) and checks that a new provisioner, from the entry the journal kept, deletes the volume.
func testKilledDuringCreate(t *testing.T, e *provisionerTest) {
	ctx := context.Background()
	release := make(chan struct{})
	blocked := blockCreate(t, e.drv, "doomed", release)
	pvc := createClaim(t, e.kube, claim(e.ns, "doomed", "immediate", "1Gi"))
	var volName string
	select {
	case volName = <-blocked:
	case <-time.After(60 * time.Second):
		t.Fatal("CreateVolume never reached the driver")
	}
	// The entry was acknowledged before CreateVolume was called, and nothing was written to the claim.
	if !recordHas(t, e.kube, pvc.UID, volName) {
		t.Fatalf("no journal entry for claim %s (volume %s) while CreateVolume runs", pvc.UID, volName)
	}
	if got, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, pvc.Name, metav1.GetOptions{}); err != nil || slices.Contains(got.Finalizers, intentKey) {
		t.Fatalf("claim written for the intent (finalizers %v, err %v)", got.Finalizers, err)
	}

	e.stopShared(t)
	rig.Eventually(t, ctx, 30*time.Second, "the abandoned call to create the volume in the driver", func(context.Context) (bool, error) {
		return countVolumes(e.drv, volName) == 1, nil
	})
	e.drv.SetBeforeCall(nil)
	if err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitClaimGone(t, e.kube, pvc, 60*time.Second)
	// No provisioner runs and the claim is gone: the record alone knows the volume.
	if !recordHas(t, e.kube, pvc.UID, volName) || countVolumes(e.drv, volName) != 1 {
		t.Fatalf("after the kill and the claim's deletion: entry kept %v, volumes %d", recordHas(t, e.kube, pvc.UID, volName), countVolumes(e.drv, volName))
	}

	deletesBefore := e.drv.Calls(csimock.DeleteVolume)
	startProvisioner(t, e.r, e.drv.Endpoint(), "--extra-create-metadata")
	rig.Eventually(t, ctx, 90*time.Second, "the volume of the deleted claim deleted", func(context.Context) (bool, error) {
		return countVolumes(e.drv, volName) == 0, nil
	})
	waitRecordCleared(t, e.kube, pvc.UID)
	if got := e.drv.Calls(csimock.DeleteVolume) - deletesBefore; got != 1 {
		t.Errorf("DeleteVolume called %d times, want 1", got)
	}
	if _, err := e.kube.CoreV1().PersistentVolumes().Get(ctx, volName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("PV %s exists for a deleted claim (err %v)", volName, err)
	}
	close(release)
}

// blockCreate makes CreateVolume for the claim named claimName send the volume's name on the returned
// channel and wait until the caller gives up or release is closed; then the driver makes the volume anyway,
// as a real backend finishes work whose caller vanished. The hook goes when t ends.
func blockCreate(t *testing.T, drv *csimock.Driver, claimName string, release <-chan struct{}) <-chan string {
	blocked := make(chan string, 1)
	drv.SetBeforeCall(func(ctx context.Context, method string, req any) error {
		if r, ok := req.(*csi.CreateVolumeRequest); ok && method == csimock.CreateVolume && r.Parameters["csi.storage.k8s.io/pvc/name"] == claimName {
			select {
			case blocked <- r.Name:
			default:
			}
			select {
			case <-ctx.Done():
			case <-release:
			}
		}
		return nil
	})
	t.Cleanup(func() { drv.SetBeforeCall(nil) })
	return blocked
}

// testCreateTimeout makes CreateVolume outlast the provisioner's --timeout, then makes the volume anyway, and
// checks the volume is deleted with the claim.
func testCreateTimeout(t *testing.T, e *provisionerTest) {
	ctx := context.Background()
	// In the shared one's place, one that times out calls after 2s.
	e.stopShared(t)
	startProvisioner(t, e.r, e.drv.Endpoint(), "--extra-create-metadata", "--timeout=2s")
	timedOut := make(chan struct{})
	e.drv.SetBeforeCall(func(ctx context.Context, method string, req any) error {
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
	t.Cleanup(func() { e.drv.SetBeforeCall(nil) })
	pvc := createClaim(t, e.kube, claim(e.ns, "slow", "immediate", "1Gi"))
	select {
	case <-timedOut:
	case <-time.After(60 * time.Second):
		t.Fatal("CreateVolume never timed out")
	}
	// The hook stays until the claim is deleted: every retry times out the same way, so the claim cannot
	// get bound first.
	volName := "pvc-" + string(pvc.UID)
	rig.Eventually(t, ctx, 30*time.Second, "the timed-out call's volume in the driver", func(context.Context) (bool, error) {
		return countVolumes(e.drv, volName) == 1, nil
	})
	if err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.drv.SetBeforeCall(nil)
	waitClaimGone(t, e.kube, pvc, 90*time.Second)
	rig.Eventually(t, ctx, 90*time.Second, "the timed-out call's volume deleted", func(context.Context) (bool, error) {
		return countVolumes(e.drv, volName) == 0, nil
	})
	waitRecordCleared(t, e.kube, pvc.UID)
	if _, err := e.kube.CoreV1().PersistentVolumes().Get(ctx, volName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("PV %s exists for a deleted claim (err %v)", volName, err)
	}
}

// testWriteVerbs checks, over every write csi-provisioner made to claims, PVs and Leases in the audit log, that
// the API server refused none (a 403 would be a verb deploy/rbac/csi-provisioner.yaml, upstream's RBAC, lacks),
// that claims were only ever updated and only as upstream does (the clone source's cloning protection): the
// intent of each claim went into the record Lease, in fewer writes than there were PVs made. It provisions
// and deletes claims of its own first; run in order, the writes of the subtests before it count too.
func testWriteVerbs(t *testing.T, e *provisionerTest) {
	var names []string
	for i := range 5 {
		pvc := createClaim(t, e.kube, claim(e.ns, fmt.Sprintf("verbs-%d", i), "immediate", "1Gi"))
		waitBound(t, e.kube, pvc)
		names = append(names, pvc.Name)
	}
	deleteClaimsWaitPVsGone(t, e.kube, e.ns, names...)
	writes := rig.Filter(e.audit.MustWrites(t), rig.ByUser(provisionerUser))
	var pvCreates int
	for _, w := range writes {
		if w.Code == 403 {
			t.Errorf("write refused by RBAC: %s", w)
		}
		switch {
		case strings.HasPrefix(w.Resource, "persistentvolumeclaims"):
			// The clone source's cloning-protection finalizer is added and removed.
			if w.Verb != "update" || w.Name != cloneSource {
				t.Errorf("claim write %s, want only updates of the clone source", w)
			}
		case w.Resource == "persistentvolumes" && w.Verb == "create" && w.Code < 300:
			pvCreates++
		}
	}
	records := countRecordWrites(writes)
	t.Logf("%d PVs created, %d journal writes", pvCreates, records)
	if pvCreates < 5 || records == 0 || records > 2*pvCreates {
		t.Errorf("%d PV creates and %d record writes: %q", pvCreates, records, rig.Strings(writes))
	}
}

// testAttributesClass provisions a claim that names a VolumeAttributesClass: deploy/rbac/csi-provisioner.yaml
// grants get on them and no list or watch, as upstream, so this passes only if the provisioner reads the class
// with a GET.
func testAttributesClass(t *testing.T, e *provisionerTest) {
	ctx := context.Background()
	vac := &storagev1.VolumeAttributesClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gold"}, DriverName: driverName, Parameters: map[string]string{"iops": "3000"},
	}
	if _, err := e.kube.StorageV1().VolumeAttributesClasses().Create(ctx, vac, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := claim(e.ns, "vac", "immediate", "1Gi")
	pvc.Spec.VolumeAttributesClassName = &vac.Name
	pv := waitBound(t, e.kube, createClaim(t, e.kube, pvc))
	if got := pv.Spec.VolumeAttributesClassName; got == nil || *got != vac.Name {
		t.Errorf("PV volumeAttributesClassName %v, want %s", got, vac.Name)
	}
}
