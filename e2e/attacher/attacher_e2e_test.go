//go:build e2e

package attacher

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// oneWorker makes the attacher handle one object at a time per queue, in the order the objects were queued,
// so that a sentinel object handled after the one under test proves the latter's writes are all made.
const oneWorker = "--worker-threads=1"

// TestE2EAttacher runs csi-attacher against one real control plane: attach and detach of a Pod's volume
// with the API writes counted by kube-apiserver's audit log, leader failover on SIGTERM and SIGKILL, taking
// over objects upstream's attacher left, and the ListVolumes reconcile.
func TestE2EAttacher(t *testing.T) {
	r := startRig(t)
	t.Run("PodAttachDetachWrites", func(t *testing.T) { testPodAttachDetach(t, r) })
	t.Run("FailoverSIGTERM", func(t *testing.T) { testFailover(t, r, failoverTerm) })
	t.Run("FailoverSIGKILL", func(t *testing.T) { testFailover(t, r, failoverKill) })
	t.Run("TakeOverFromUpstream", func(t *testing.T) { testTakeOverFromUpstream(t, r) })
	t.Run("ReconcileRepublishes", func(t *testing.T) { testReconcile(t, r) })
}

// testPodAttachDetach attaches a Pod's volume through kube-controller-manager and csi-attacher, then detaches
// it by deleting the Pod, and counts every write to VolumeAttachments and PersistentVolumes on the way.
func testPodAttachDetach(t *testing.T, r *rig) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := newFixture(t, ctx, r, "attach")
	vol := f.podVolume("pv-attach", "pvc-attach")
	endpoint := e2erig.FreeAddr(t)
	r.startAttacher(t, "attacher", f.drv.Endpoint(), "--http-endpoint="+endpoint, oneWorker)

	auditStart := len(r.Audit.MustWrites(t))
	pod := podUsing("default", "pod-attach", f.node, "pvc-attach")
	f.check(f.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}))
	var va *storagev1.VolumeAttachment
	var attachWrites, detachWrites []e2erig.AuditWrite
	if !t.Run("attach: publish context in status, one or two writes, none to the PersistentVolume", func(t *testing.T) {
		va, attachWrites = checkAttach(f.in(t), vol, auditStart)
	}) {
		return
	}
	t.Run("metrics and leader health after the attach", func(t *testing.T) { checkMetrics(t, ctx, endpoint, f.driver) })
	t.Run("detach on Pod deletion: one patch, one ControllerUnpublish", func(t *testing.T) {
		detachWrites = checkDetach(f.in(t), vol, va, pod)
	})
	t.Run("no other component patches VolumeAttachments", func(t *testing.T) {
		// kube-controller-manager creates and deletes VolumeAttachments but never patches them, so the
		// counts above are the attacher's alone.
		for _, w := range append(attachWrites, detachWrites...) {
			if w.User != attacherUser && strings.HasPrefix(w.Resource, "volumeattachments") && w.Verb != "create" && w.Verb != "delete" {
				t.Errorf("unexpected VolumeAttachment write by another component: %s", w)
			}
		}
	})
}

// podVolume creates the driver's CSIDriver (attach required), a volume with a PersistentVolume pre-bound to
// the claim, and the claim, and waits until the binder bound them: kube-controller-manager attaches only
// volumes of bound claims.
func (f *fixture) podVolume(pvName, claimName string) csimock.Volume {
	f.t.Helper()
	f.check(f.client.StorageV1().CSIDrivers().Create(f.ctx, newCSIDriver(f.driver, true), metav1.CreateOptions{}))
	vol, _ := f.volume(pvName, func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: claimName}
	})
	f.check(f.client.CoreV1().PersistentVolumeClaims("default").Create(f.ctx, boundClaim("default", claimName, pvName), metav1.CreateOptions{}))
	e2erig.Eventually(f.t, f.ctx, waitTimeout, "claim "+claimName+" bound", func(ctx context.Context) (bool, error) {
		got, err := f.client.CoreV1().PersistentVolumeClaims("default").Get(ctx, claimName, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.ClaimBound, err
	})
	return vol
}

// checkAttach waits for the Pod's VolumeAttachment to be attached, then for a sentinel's, and checks the
// writes made from auditStart on for the attach. It returns the VolumeAttachment and those writes.
func checkAttach(f *fixture, vol csimock.Volume, auditStart int) (*storagev1.VolumeAttachment, []e2erig.AuditWrite) {
	t := f.t
	t.Helper()
	var va *storagev1.VolumeAttachment
	e2erig.Eventually(t, f.ctx, waitTimeout, "the Pod's VolumeAttachment attached", func(ctx context.Context) (bool, error) {
		list, err := f.client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range list.Items {
			if list.Items[i].Spec.Attacher == f.driver && list.Items[i].Status.Attached {
				va = &list.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	if got, want := va.Status.AttachmentMetadata["devicePath"], "/dev/mock/"+vol.ID; got != want {
		t.Errorf("attachmentMetadata devicePath = %q, want %q (the publish context)", got, want)
	}
	if !slices.Contains(va.Finalizers, "external-attacher/attach-csi-stowage-io") {
		t.Errorf("finalizers = %v, want external-attacher/attach-csi-stowage-io", va.Finalizers)
	}
	const sentinel = "attach-sentinel-1"
	writes := without(f.attachSentinel(sentinel)[auditStart:], sentinel)
	t.Logf("writes to VolumeAttachments and PersistentVolumes during attach:\n  %s", strings.Join(e2erig.Strings(writes), "\n  "))
	byAttacher := e2erig.Filter(writes, e2erig.ByUser(attacherUser))
	if len(byAttacher) == 0 || len(byAttacher) > 2 {
		t.Errorf("csi-attacher made %d writes for the first attach, want 1 or 2 (upstream: 3): %q", len(byAttacher), e2erig.Strings(byAttacher))
	}
	for _, w := range byAttacher {
		if strings.HasPrefix(w.Resource, "persistentvolumes") {
			t.Errorf("csi-attacher wrote a PersistentVolume: %s", w)
		}
	}
	for _, w := range writes {
		if w.User != attacherUser && !(w.Verb == "create" && w.Resource == "volumeattachments") {
			t.Logf("note: another component wrote during the attach: %s", w)
		}
	}
	if n := f.drv.CallsFor(csimock.ControllerPublishVolume, vol.ID); n != 1 {
		t.Errorf("ControllerPublishVolume calls for %s = %d, want 1", vol.ID, n)
	}
	if v := driverVolume(f, vol.ID); !slices.Equal(v.PublishedNodes, []string{f.nodeID}) {
		t.Errorf("driver volume %+v, want published to %s", v, f.nodeID)
	}
	return va, writes
}

// checkDetach deletes the Pod, which makes kube-controller-manager delete the VolumeAttachment, waits until it
// is gone and a sentinel is attached, and checks the writes for the detach, which it returns.
func checkDetach(f *fixture, vol csimock.Volume, va *storagev1.VolumeAttachment, pod *corev1.Pod) []e2erig.AuditWrite {
	t := f.t
	t.Helper()
	detachStart := len(f.r.Audit.MustWrites(t))
	zero := int64(0)
	if err := f.client.CoreV1().Pods(pod.Namespace).Delete(f.ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	f.waitVAGone(va.Name)
	const sentinel = "attach-sentinel-2"
	writes := without(f.attachSentinel(sentinel)[detachStart:], "attach-sentinel-1", sentinel)
	t.Logf("writes to VolumeAttachments and PersistentVolumes during detach:\n  %s", strings.Join(e2erig.Strings(writes), "\n  "))
	byAttacher := e2erig.Strings(e2erig.Filter(writes, e2erig.ByUser(attacherUser)))
	if len(byAttacher) != 1 || !strings.HasPrefix(byAttacher[0], "patch volumeattachments "+va.Name+" 200") {
		t.Errorf("csi-attacher writes for the detach = %q, want exactly one patch of %s (upstream: 2)", byAttacher, va.Name)
	}
	if n := f.drv.CallsFor(csimock.ControllerUnpublishVolume, vol.ID); n != 1 {
		t.Errorf("ControllerUnpublishVolume calls for %s = %d, want exactly 1", vol.ID, n)
	}
	if v := driverVolume(f, vol.ID); len(v.PublishedNodes) != 0 {
		t.Errorf("driver volume %+v, want published nowhere", v)
	}
	return writes
}

// without drops the writes for the objects named names (a sentinel's VolumeAttachment and PersistentVolume).
func without(writes []e2erig.AuditWrite, names ...string) []e2erig.AuditWrite {
	return e2erig.Filter(writes, func(w e2erig.AuditWrite) bool { return !slices.Contains(names, w.Name) })
}

// driverVolume is the driver's volume with ID id.
func driverVolume(f *fixture, id string) csimock.Volume {
	f.t.Helper()
	for _, v := range f.drv.Volumes() {
		if v.ID == id {
			return v
		}
	}
	f.t.Fatalf("driver has no volume %s", id)
	return csimock.Volume{}
}

// checkMetrics scrapes the attacher's /metrics and /healthz/leader-election.
func checkMetrics(t *testing.T, ctx context.Context, endpoint, driver string) {
	t.Helper()
	body := httpGet(t, ctx, "http://"+endpoint+"/metrics")
	for _, want := range []string{
		// No migrated label: as upstream, only a driver that replaces an in-tree plugin has it.
		`csi_sidecar_operations_seconds_count{driver_name="` + driver + `",grpc_status_code="OK",method_name="/csi.v1.Controller/ControllerPublishVolume"}`,
		`workqueue_adds_total{name="csi-attacher-va"}`,
		`workqueue_adds_total{name="csi-attacher-pv"}`,
		// name="" whatever the Lease, as upstream's elector is unnamed.
		`leader_election_master_status{name=""} 1`,
		// Without --kube-api-qps/--kube-api-burst, the real API server's Priority and Fairness paces the
		// attacher: no client-side limiter.
		`stowage_kube_client_rate_limit_qps{burst="100",source="apf"} -1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if got := httpGet(t, ctx, "http://"+endpoint+"/healthz/leader-election"); got != "ok" {
		t.Errorf("/healthz/leader-election = %q, want ok", got)
	}
}

// httpGet fetches url and fails t unless the answer is 200 OK.
func httpGet(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	code, body := e2erig.Get(t, ctx, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d: %s", url, code, body)
	}
	return body
}

// testTakeOverFromUpstream starts Stowage's attacher on objects upstream's attacher left behind: a
// VolumeAttachment attached with only the finalizer and the node-id annotation, and a PersistentVolume
// with upstream's PV finalizer. Deleting them detaches through the PV (as upstream would) and removes
// both finalizers: one write each, and one ControllerUnpublish.
func testTakeOverFromUpstream(t *testing.T, r *rig) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := newFixture(t, ctx, r, "takeover")
	vol := f.leftByUpstream("va-takeover", "pv-takeover")
	before := len(r.Audit.MustWrites(t))
	r.startAttacher(t, "attacher", f.drv.Endpoint(), oneWorker)
	f.deleteAttachedVolume("va-takeover", "pv-takeover")

	// The sentinel: a volume attached by this attacher, with upstream's PV finalizer, deleted the same way.
	// Once the attacher has patched its PV, it has handled every event of the first pair on both its queues.
	f.volume("pv-takeover-sentinel", func(pv *corev1.PersistentVolume) { pv.Finalizers = []string{upstreamFinalizer(f.driver)} })
	f.attachment("va-takeover-sentinel", "pv-takeover-sentinel", nil)
	f.waitAttached("va-takeover-sentinel")
	f.deleteAttachedVolume("va-takeover-sentinel", "pv-takeover-sentinel")
	writes := r.Audit.WaitFor(t, ctx, waitTimeout, "csi-attacher's patch of pv-takeover-sentinel", func(w e2erig.AuditWrite) bool {
		return w.User == attacherUser && w.Resource == "persistentvolumes" && w.Name == "pv-takeover-sentinel"
	})
	ours := e2erig.Filter(without(writes[before:], "va-takeover-sentinel", "pv-takeover-sentinel"), e2erig.ByUser(attacherUser))
	// kube-controller-manager removes its own kubernetes.io/pv-protection finalizer from the deleted PV at the
	// same moment, so the attacher's preconditioned patch may meet a newer PV: a 409 that wrote nothing, then
	// a retry. Conflicts are logged; the writes that took effect must be exactly these.
	conflicts := e2erig.Filter(ours, func(w e2erig.AuditWrite) bool { return w.Code == http.StatusConflict })
	if len(conflicts) > 0 {
		t.Logf("conflicts (retried): %q", e2erig.Strings(conflicts))
	}
	got := e2erig.Strings(e2erig.Filter(ours, func(w e2erig.AuditWrite) bool { return w.Code != http.StatusConflict }))
	want := []string{
		"patch volumeattachments va-takeover 200 " + attacherUser,
		"patch persistentvolumes pv-takeover 200 " + attacherUser,
	}
	if !slices.Equal(got, want) {
		t.Errorf("csi-attacher writes = %q, want %q", got, want)
	}
	if n := f.drv.CallsFor(csimock.ControllerUnpublishVolume, vol.ID); n != 1 {
		t.Errorf("ControllerUnpublishVolume calls for %s = %d, want 1", vol.ID, n)
	}
}

// upstreamFinalizer is the finalizer upstream's attacher puts on driver's VolumeAttachments and
// PersistentVolumes.
func upstreamFinalizer(driver string) string {
	return "external-attacher/" + strings.ReplaceAll(driver, ".", "-")
}

// leftByUpstream creates what upstream's attacher leaves for an attached volume: a PersistentVolume with its
// PV finalizer, and a VolumeAttachment with its finalizer, the node-id annotation and an attached status.
func (f *fixture) leftByUpstream(vaName, pvName string) csimock.Volume {
	f.t.Helper()
	finalizer := upstreamFinalizer(f.driver)
	vol, _ := f.volume(pvName, func(pv *corev1.PersistentVolume) { pv.Finalizers = []string{finalizer} })
	va := f.attachment(vaName, pvName, func(va *storagev1.VolumeAttachment) {
		va.Finalizers = []string{finalizer}
		va.Annotations = map[string]string{"csi.alpha.kubernetes.io/node-id": f.nodeID}
	})
	va.Status.Attached = true
	va.Status.AttachmentMetadata = map[string]string{"devicePath": "/dev/mock/" + vol.ID}
	f.check(f.client.StorageV1().VolumeAttachments().UpdateStatus(f.ctx, va, metav1.UpdateOptions{}))
	return vol
}

// deleteAttachedVolume deletes the VolumeAttachment, waits until the attacher let it go, then does the same
// with the PersistentVolume.
func (f *fixture) deleteAttachedVolume(vaName, pvName string) {
	f.t.Helper()
	if err := f.client.StorageV1().VolumeAttachments().Delete(f.ctx, vaName, metav1.DeleteOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.waitVAGone(vaName)
	if err := f.client.CoreV1().PersistentVolumes().Delete(f.ctx, pvName, metav1.DeleteOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.waitPVGone(pvName)
}

// testReconcile detaches a volume behind Kubernetes' back (a ControllerUnpublish straight to the driver)
// and checks the ListVolumes reconcile publishes it again, without writing to the API: the publish
// context is unchanged, so the status stays as it is.
func testReconcile(t *testing.T, r *rig) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := newFixture(t, ctx, r, "reconcile")
	vol, pv := f.volume("pv-reconcile", nil)
	f.attachment("va-reconcile", pv.Name, nil)
	before := len(r.Audit.MustWrites(t))
	r.startAttacher(t, "attacher", f.drv.Endpoint(), "--reconcile-sync=1s", oneWorker)
	f.waitAttached("va-reconcile")

	conn, err := grpc.NewClient("unix://"+f.drv.Socket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := csi.NewControllerClient(conn).ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol.ID, NodeId: f.nodeID}); err != nil {
		t.Fatal(err)
	}
	e2erig.Eventually(t, ctx, waitTimeout, "volume published again", func(context.Context) (bool, error) {
		return slices.Equal(driverVolume(f, vol.ID).PublishedNodes, []string{f.nodeID}), nil
	})
	if n := f.drv.Calls(csimock.ListVolumes); n == 0 {
		t.Error("ListVolumes never called")
	}
	const sentinel = "reconcile-sentinel"
	writes := e2erig.Strings(e2erig.Filter(without(f.attachSentinel(sentinel)[before:], sentinel), e2erig.ByUser(attacherUser)))
	if len(writes) != 2 {
		t.Errorf("csi-attacher writes = %q, want the attach's 2 and none from the reconcile", writes)
	}
	if n := f.drv.CallsFor(csimock.ControllerPublishVolume, vol.ID); n != 2 {
		t.Errorf("ControllerPublishVolume calls for %s = %d, want 2 (attach, then the reconcile's)", vol.ID, n)
	}
}
