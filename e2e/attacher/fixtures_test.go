//go:build e2e || bench

package attacher

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// The objects of the tests, one function per kind. They are built here and nowhere else, so every test
// attaches the same kind of volume to the same kind of node.

// newNode is a node whose volumes kube-controller-manager attaches: it does so only for nodes that opt in
// with this annotation, as kubelet does.
func newNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
	}}
}

// newCSINode registers driver on node under nodeID, as kubelet does when the driver's node plugin starts.
func newCSINode(node, driver, nodeID string) *storagev1.CSINode {
	return &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec:       storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driver, NodeID: nodeID}}},
	}
}

// newCSIDriver is driver's CSIDriver object; with attachRequired kube-controller-manager creates
// VolumeAttachments for its volumes.
func newCSIDriver(driver string, attachRequired bool) *storagev1.CSIDriver {
	return &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec:       storagev1.CSIDriverSpec{AttachRequired: &attachRequired},
	}
}

// csiPV is a retained 1Gi ReadWriteOnce PersistentVolume of driver's volume handle.
func csiPV(name, driver, handle string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: driver, VolumeHandle: handle, FSType: "ext4",
			}},
		},
	}
}

// boundClaim is a claim without a StorageClass for the PersistentVolume pv, for the binder to bind.
func boundClaim(ns, name, pv string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: new(string),
			VolumeName:       pv,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// podUsing is a Pod already scheduled to node that mounts claim; no kubelet runs it, it only puts the volume
// into kube-controller-manager's desired state for the node.
func podUsing(ns, name, node, claim string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/none"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}},
		},
	}
}

// directVA is a VolumeAttachment of pv to node, as kube-controller-manager would create for a Pod.
func directVA(name, driver, pv, node string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: driver, NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv},
		},
	}
}

// createNode creates the node and its CSINode with driver registered under nodeID.
func createNode(t testing.TB, ctx context.Context, client kubernetes.Interface, node, driver, nodeID string) {
	t.Helper()
	if _, err := client.CoreV1().Nodes().Create(ctx, newNode(node), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.StorageV1().CSINodes().Create(ctx, newCSINode(node, driver, nodeID), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// fixture is the setting of one attacher test: a mock driver and one node registered for it.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	r      *rig
	client kubernetes.Interface
	drv    *csimock.Driver
	driver string // name + ".csi.stowage.io"
	node   string // "node-" + name
	nodeID string // "mock-node-" + name
}

// newFixture starts the mock driver name.csi.stowage.io (stopped when t ends) and creates node-<name> with
// its CSINode.
func newFixture(t *testing.T, ctx context.Context, r *rig, name string) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: ctx, r: r, client: r.Client,
		driver: name + ".csi.stowage.io", node: "node-" + name, nodeID: "mock-node-" + name}
	drv, err := csimock.Start(ctx, csimock.Options{Name: f.driver})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	f.drv = drv
	createNode(t, ctx, f.client, f.node, f.driver, f.nodeID)
	return f
}

// in is the fixture for the subtest t: a subtest must fail through its own t.
func (f *fixture) in(t *testing.T) *fixture {
	g := *f
	g.t = t
	return &g
}

// check fails the test on a create's error.
func (f *fixture) check(_ any, err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// volume adds a volume to the driver and creates its PersistentVolume, named name; edit, if not nil,
// changes the PersistentVolume before it is created.
func (f *fixture) volume(name string, edit func(*corev1.PersistentVolume)) (csimock.Volume, *corev1.PersistentVolume) {
	f.t.Helper()
	vol := f.drv.AddVolume(name, 1<<30)
	pv := csiPV(name, f.driver, vol.ID)
	if edit != nil {
		edit(pv)
	}
	f.check(f.client.CoreV1().PersistentVolumes().Create(f.ctx, pv, metav1.CreateOptions{}))
	return vol, pv
}

// attachment creates a VolumeAttachment of pv to the fixture's node; edit, if not nil, changes it first.
func (f *fixture) attachment(name, pv string, edit func(*storagev1.VolumeAttachment)) *storagev1.VolumeAttachment {
	f.t.Helper()
	va := directVA(name, f.driver, pv, f.node)
	if edit != nil {
		edit(va)
	}
	created, err := f.client.StorageV1().VolumeAttachments().Create(f.ctx, va, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return created
}

// waitAttached waits until the VolumeAttachment name is attached and returns it.
func (f *fixture) waitAttached(name string) *storagev1.VolumeAttachment {
	f.t.Helper()
	var va *storagev1.VolumeAttachment
	e2erig.Eventually(f.t, f.ctx, waitTimeout, "VolumeAttachment "+name+" attached", func(ctx context.Context) (bool, error) {
		var err error
		va, err = f.client.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
		return err == nil && va.Status.Attached, err
	})
	return va
}

// waitVAGone waits until the VolumeAttachment name is deleted, finalizers and all.
func (f *fixture) waitVAGone(name string) {
	f.t.Helper()
	e2erig.Eventually(f.t, f.ctx, waitTimeout, "VolumeAttachment "+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := f.client.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// waitPVGone waits until the PersistentVolume name is deleted, finalizers and all.
func (f *fixture) waitPVGone(name string) {
	f.t.Helper()
	e2erig.Eventually(f.t, f.ctx, waitTimeout, "PersistentVolume "+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := f.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// attachSentinel attaches one more volume of the driver, name, and returns the audit log as it stands once
// the attacher's status write for it is there. The attacher runs with one worker per queue, so it handled
// everything queued before the sentinel's VolumeAttachment was created before it; writes for the object
// under test missing from the returned log were never made.
func (f *fixture) attachSentinel(name string) []e2erig.AuditWrite {
	f.t.Helper()
	_, pv := f.volume(name, nil)
	f.attachment(name, pv.Name, nil)
	return f.r.Audit.WaitFor(f.t, f.ctx, waitTimeout, "csi-attacher's status write for sentinel "+name, func(w e2erig.AuditWrite) bool {
		return w.User == attacherUser && w.Resource == "volumeattachments/status" && w.Name == name
	})
}

// attachedCount counts the VolumeAttachments of driver that are attached, and all of them.
func attachedCount(ctx context.Context, client kubernetes.Interface, driver string) (attached, total int, err error) {
	list, err := client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, 0, err
	}
	for _, va := range list.Items {
		if va.Spec.Attacher != driver {
			continue
		}
		total++
		if va.Status.Attached {
			attached++
		}
	}
	return attached, total, nil
}

// blockPublish makes ControllerPublish block until the returned channel is closed; calls blocked then fail
// as interrupted. The leader's calls so stay in flight until the test stops it.
func blockPublish(drv *csimock.Driver) chan struct{} {
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
	return release
}
