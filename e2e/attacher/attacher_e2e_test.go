//go:build e2e

package attacher

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stowage-csi/stowage/e2e/csimock"
)

// TestE2EAttacher runs csi-attacher against one real control plane: attach and detach of a Pod's volume
// with the API writes counted by kube-apiserver's audit log, then leader failover on SIGTERM and SIGKILL.
func TestE2EAttacher(t *testing.T) {
	r := startRig(t)
	t.Run("PodAttachDetachWrites", func(t *testing.T) { testPodAttachDetach(t, r) })
	t.Run("FailoverSIGTERM", func(t *testing.T) { testFailover(t, r, syscall.SIGTERM) })
	t.Run("FailoverSIGKILL", func(t *testing.T) { testFailover(t, r, syscall.SIGKILL) })
	t.Run("TakeOverFromUpstream", func(t *testing.T) { testTakeOverFromUpstream(t, r) })
	t.Run("ReconcileRepublishes", func(t *testing.T) { testReconcile(t, r) })
}

func testPodAttachDetach(t *testing.T, r *rig) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const driver, node, nodeID = "attach.csi.stowage.io", "node-attach", "mock-node-1"
	drv, err := csimock.Start(ctx, csimock.Options{Name: driver})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	vol := drv.AddVolume("pv-attach", 1<<30)

	client := r.client
	n, csiNode := nodeObjects(node, driver, nodeID)
	pv := csiPV("pv-attach", driver, vol.ID)
	pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "pvc-attach"}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pvc-attach"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: new(string),
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	attachRequired := true
	mustCreate(t, func() error {
		_, err := client.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{
			ObjectMeta: metav1.ObjectMeta{Name: driver},
			Spec:       storagev1.CSIDriverSpec{AttachRequired: &attachRequired},
		}, metav1.CreateOptions{})
		return err
	}, func() error { _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); return err },
		func() error {
			_, err := client.StorageV1().CSINodes().Create(ctx, csiNode, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{})
			return err
		})
	poll(t, ctx, "PVC bound", func(ctx context.Context) (bool, error) {
		got, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, pvc.Name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.ClaimBound, nil
	})

	endpoint := freePort(t)
	r.startAttacher(t, "attacher", drv.Endpoint(), "--http-endpoint="+endpoint)
	auditStart := r.auditWrites(t, "")

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pod-attach"},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/none"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name},
			}}},
		},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var va *storagev1.VolumeAttachment
	poll(t, ctx, "VolumeAttachment attached", func(ctx context.Context) (bool, error) {
		list, err := client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range list.Items {
			if list.Items[i].Spec.Attacher == driver && list.Items[i].Status.Attached {
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
	if got := drv.Volumes(); len(got) != 1 || !slices.Equal(got[0].PublishedNodes, []string{nodeID}) {
		t.Errorf("driver volumes = %+v, want %s published to %s", got, vol.ID, nodeID)
	}
	// Writes come with their audit event before the response; give a duplicate write time to show up.
	time.Sleep(3 * time.Second)
	attachWrites := since(auditStart, r.auditWrites(t, ""))
	t.Logf("writes to VolumeAttachments and PersistentVolumes during attach:\n  %s", strings.Join(attachWrites, "\n  "))
	byAttacher := writesBy(attachWrites, attacherUser)
	if len(byAttacher) == 0 || len(byAttacher) > 2 {
		t.Errorf("csi-attacher made %d writes for the first attach, want 1 or 2 (upstream: 3): %q", len(byAttacher), byAttacher)
	}
	for _, w := range byAttacher {
		if strings.Contains(w, "persistentvolumes") {
			t.Errorf("csi-attacher wrote a PersistentVolume: %s", w)
		}
	}
	for _, w := range attachWrites {
		if !strings.Contains(w, attacherUser) && !strings.HasPrefix(w, "create volumeattachments") {
			t.Logf("note: another component wrote during the attach: %s", w)
		}
	}
	if n := drv.Calls(csimock.ControllerPublishVolume); n != 1 {
		t.Errorf("ControllerPublishVolume calls = %d, want 1", n)
	}
	checkMetrics(t, ctx, endpoint, driver)

	// Detach: deleting the Pod makes kube-controller-manager delete the VolumeAttachment.
	detachStart := r.auditWrites(t, "")
	zero := int64(0)
	if err := client.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "VolumeAttachment gone", func(ctx context.Context) (bool, error) {
		_, err := client.StorageV1().VolumeAttachments().Get(ctx, va.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	time.Sleep(3 * time.Second)
	detachWrites := since(detachStart, r.auditWrites(t, ""))
	t.Logf("writes to VolumeAttachments and PersistentVolumes during detach:\n  %s", strings.Join(detachWrites, "\n  "))
	byAttacher = writesBy(detachWrites, attacherUser)
	if len(byAttacher) != 1 || !strings.HasPrefix(byAttacher[0], "patch volumeattachments "+va.Name+" 200") {
		t.Errorf("csi-attacher writes for the detach = %q, want exactly one patch of %s (upstream: 2)", byAttacher, va.Name)
	}
	if n := drv.Calls(csimock.ControllerUnpublishVolume); n != 1 {
		t.Errorf("ControllerUnpublishVolume calls = %d, want exactly 1", n)
	}
	if got := drv.Volumes(); len(got) != 1 || len(got[0].PublishedNodes) != 0 {
		t.Errorf("driver volumes = %+v, want %s published nowhere", got, vol.ID)
	}
	// kube-controller-manager creates and deletes VolumeAttachments but never patches them, so the
	// counts above are the attacher's alone.
	for _, w := range append(attachWrites, detachWrites...) {
		if !strings.Contains(w, attacherUser) && strings.Contains(w, "volumeattachments") &&
			!strings.HasPrefix(w, "create ") && !strings.HasPrefix(w, "delete ") {
			t.Errorf("unexpected VolumeAttachment write by another component: %s", w)
		}
	}
}

// checkMetrics scrapes the attacher's /metrics and /healthz/leader-election.
func checkMetrics(t *testing.T, ctx context.Context, endpoint, driver string) {
	t.Helper()
	body := httpGet(t, ctx, "http://"+endpoint+"/metrics")
	for _, want := range []string{
		`csi_sidecar_operations_seconds_count{driver_name="` + driver + `",grpc_status_code="OK",method_name="/csi.v1.Controller/ControllerPublishVolume",migrated="false"}`,
		`workqueue_adds_total{name="csi-attacher-va"}`,
		`workqueue_adds_total{name="csi-attacher-pv"}`,
		`leader_election_master_status{name="external-attacher-leader-` + strings.ReplaceAll(driver, ".", "-") + `"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if got := httpGet(t, ctx, "http://"+endpoint+"/healthz/leader-election"); got != "ok" {
		t.Errorf("/healthz/leader-election = %q, want ok", got)
	}
}

func httpGet(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer rsp.Body.Close()
	data, err := io.ReadAll(rsp.Body)
	if err != nil || rsp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v: %s", url, rsp.StatusCode, err, data)
	}
	return string(data)
}

// testFailover runs two replicas, stops the leader with sig while it is in the middle of
// ControllerPublish calls, and checks the standby finishes the work. With SIGTERM the leader drains
// and releases the lease on its way out, so the standby does not wait for the lease to expire.
func testFailover(t *testing.T, r *rig, sig syscall.Signal) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := "kill"
	if sig == syscall.SIGTERM {
		name = "term"
	}
	driver := "failover-" + name + ".csi.stowage.io"
	node, nodeID := "node-failover-"+name, "mock-node-"+name
	lease := "external-attacher-leader-" + strings.ReplaceAll(driver, ".", "-")
	const vas = 3

	drv, err := csimock.Start(ctx, csimock.Options{Name: driver})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	// ControllerPublish blocks until release is closed; calls blocked then fail as interrupted.
	release := make(chan struct{})
	drv.SetBeforeCall(func(ctx context.Context, method string, _ any) error {
		if method != csimock.ControllerPublishVolume {
			return nil
		}
		select {
		case <-release:
			return status.Error(codes.Aborted, "interrupted by the test")
		case <-ctx.Done():
			return ctx.Err()
		}
	})

	client := r.client
	n, csiNode := nodeObjects(node, driver, nodeID)
	mustCreate(t,
		func() error { _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); return err },
		func() error {
			_, err := client.StorageV1().CSINodes().Create(ctx, csiNode, metav1.CreateOptions{})
			return err
		})
	for i := range vas {
		vol := drv.AddVolume(fmt.Sprintf("pv-%s-%d", name, i), 1<<30)
		pv := csiPV(vol.Name, driver, vol.ID)
		if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	leArgs := []string{"--leader-election-lease-duration=8s", "--leader-election-renew-deadline=5s", "--leader-election-retry-period=2s"}
	leader := r.startAttacher(t, "leader", drv.Endpoint(), leArgs...)
	var leaderID string
	poll(t, ctx, "first replica leads", func(ctx context.Context) (bool, error) {
		l, err := client.CoordinationV1().Leases(attacherNamespace).Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return false, nil
		}
		leaderID = *l.Spec.HolderIdentity
		return true, nil
	})
	r.startAttacher(t, "standby", drv.Endpoint(), leArgs...)

	for i := range vas {
		va := directVA(fmt.Sprintf("va-%s-%d", name, i), driver, fmt.Sprintf("pv-%s-%d", name, i), node)
		if _, err := client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, ctx, "leader in ControllerPublish", func(context.Context) (bool, error) {
		return drv.Calls(csimock.ControllerPublishVolume) >= 1, nil
	})

	leader.Signal(sig)
	if sig == syscall.SIGTERM {
		close(release) // the leader's in-flight calls fail, its workers drain, it releases the lease
	}
	waitCtx, waitCancel := context.WithTimeout(ctx, time.Minute)
	exitErr := leader.Wait(waitCtx)
	waitCancel()
	stoppedAt := time.Now()
	if sig == syscall.SIGTERM {
		if exitErr != nil {
			t.Errorf("leader exit after SIGTERM = %v, want a clean exit", exitErr)
		}
		l, err := client.CoordinationV1().Leases(attacherNamespace).Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := l.Spec.HolderIdentity; h != nil && *h == leaderID {
			t.Errorf("lease still held by the stopped leader %s: not released on graceful exit", leaderID)
		}
	} else if exitErr == nil {
		t.Errorf("leader exit after SIGKILL = nil, want killed")
	}
	drv.SetBeforeCall(nil)

	var newLeader string
	poll(t, ctx, "standby leads", func(ctx context.Context) (bool, error) {
		l, err := client.CoordinationV1().Leases(attacherNamespace).Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, nil
		}
		newLeader = *l.Spec.HolderIdentity
		return newLeader != "" && newLeader != leaderID, nil
	})
	t.Logf("%s: standby %s took the lease %.1fs after the leader %s exited (lease duration 8s)", sig, newLeader, time.Since(stoppedAt).Seconds(), leaderID)
	poll(t, ctx, "standby attached every VolumeAttachment", func(ctx context.Context) (bool, error) {
		attached, total, err := attachedCount(ctx, client, driver)
		return err == nil && total == vas && attached == vas, nil
	})
	for _, v := range drv.Volumes() {
		if !slices.Equal(v.PublishedNodes, []string{nodeID}) {
			t.Errorf("volume %s published to %v, want [%s]", v.ID, v.PublishedNodes, nodeID)
		}
	}
}

func writesBy(writes []string, user string) []string {
	var out []string
	for _, w := range writes {
		if strings.HasSuffix(w, " "+user) {
			out = append(out, w)
		}
	}
	return out
}

func mustCreate(t *testing.T, creates ...func() error) {
	t.Helper()
	for _, c := range creates {
		if err := c(); err != nil {
			t.Fatal(err)
		}
	}
}

func poll(t *testing.T, ctx context.Context, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// testTakeOverFromUpstream starts Stowage's attacher on objects upstream's attacher left behind: a
// VolumeAttachment attached with only the finalizer and the node-id annotation, and a PersistentVolume
// with upstream's PV finalizer. Deleting them detaches through the PV (as upstream would) and removes
// both finalizers: one write each, and one ControllerUnpublish.
func testTakeOverFromUpstream(t *testing.T, r *rig) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const driver, node, nodeID = "takeover.csi.stowage.io", "node-takeover", "mock-node-takeover"
	const finalizer = "external-attacher/takeover-csi-stowage-io"
	drv, err := csimock.Start(ctx, csimock.Options{Name: driver})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	vol := drv.AddVolume("pv-takeover", 1<<30)
	client := r.client
	n, csiNode := nodeObjects(node, driver, nodeID)
	pv := csiPV(vol.Name, driver, vol.ID)
	pv.Finalizers = []string{finalizer}
	va := directVA("va-takeover", driver, pv.Name, node)
	va.Finalizers = []string{finalizer}
	va.Annotations = map[string]string{"csi.alpha.kubernetes.io/node-id": nodeID}
	mustCreate(t,
		func() error { _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); return err },
		func() error {
			_, err := client.StorageV1().CSINodes().Create(ctx, csiNode, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
			return err
		},
		func() error {
			created, err := client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			created.Status.Attached = true
			created.Status.AttachmentMetadata = map[string]string{"devicePath": "/dev/mock/" + vol.ID}
			_, err = client.StorageV1().VolumeAttachments().UpdateStatus(ctx, created, metav1.UpdateOptions{})
			return err
		})

	before := r.auditWrites(t, attacherUser)
	r.startAttacher(t, "attacher", drv.Endpoint())
	if err := client.StorageV1().VolumeAttachments().Delete(ctx, va.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "VolumeAttachment gone", func(ctx context.Context) (bool, error) {
		_, err := client.StorageV1().VolumeAttachments().Get(ctx, va.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err := client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "PersistentVolume gone", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	time.Sleep(2 * time.Second)
	writes := since(before, r.auditWrites(t, attacherUser))
	want := []string{
		"patch volumeattachments va-takeover 200 " + attacherUser,
		"patch persistentvolumes pv-takeover 200 " + attacherUser,
	}
	if !slices.Equal(writes, want) {
		t.Errorf("csi-attacher writes = %q, want %q", writes, want)
	}
	if n := drv.Calls(csimock.ControllerUnpublishVolume); n != 1 {
		t.Errorf("ControllerUnpublishVolume calls = %d, want 1", n)
	}
}

// testReconcile detaches a volume behind Kubernetes' back (a ControllerUnpublish straight to the driver)
// and checks the ListVolumes reconcile publishes it again, without writing to the API: the publish
// context is unchanged, so the status stays as it is.
func testReconcile(t *testing.T, r *rig) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const driver, node, nodeID = "reconcile.csi.stowage.io", "node-reconcile", "mock-node-reconcile"
	drv, err := csimock.Start(ctx, csimock.Options{Name: driver})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	vol := drv.AddVolume("pv-reconcile", 1<<30)
	client := r.client
	n, csiNode := nodeObjects(node, driver, nodeID)
	mustCreate(t,
		func() error { _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); return err },
		func() error {
			_, err := client.StorageV1().CSINodes().Create(ctx, csiNode, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.CoreV1().PersistentVolumes().Create(ctx, csiPV(vol.Name, driver, vol.ID), metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.StorageV1().VolumeAttachments().Create(ctx, directVA("va-reconcile", driver, vol.Name, node), metav1.CreateOptions{})
			return err
		})
	before := r.auditWrites(t, attacherUser)
	r.startAttacher(t, "attacher", drv.Endpoint(), "--reconcile-sync=1s")
	poll(t, ctx, "VolumeAttachment attached", func(ctx context.Context) (bool, error) {
		attached, _, err := attachedCount(ctx, client, driver)
		return err == nil && attached == 1, nil
	})

	conn, err := grpc.NewClient("unix://"+drv.Socket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := csi.NewControllerClient(conn).ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol.ID, NodeId: nodeID}); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "volume published again", func(context.Context) (bool, error) {
		v := drv.Volumes()
		return len(v) == 1 && slices.Equal(v[0].PublishedNodes, []string{nodeID}), nil
	})
	if n := drv.Calls(csimock.ControllerPublishVolume); n != 2 {
		t.Errorf("ControllerPublishVolume calls = %d, want 2 (attach, then the reconcile's)", n)
	}
	if n := drv.Calls(csimock.ListVolumes); n == 0 {
		t.Error("ListVolumes never called")
	}
	time.Sleep(2 * time.Second)
	if writes := since(before, r.auditWrites(t, attacherUser)); len(writes) != 2 {
		t.Errorf("csi-attacher writes = %q, want the attach's 2 and none from the reconcile", writes)
	}
}
