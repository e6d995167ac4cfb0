//go:build e2e

package provisioner

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/csimock"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

const (
	snapshotSourceFinalizer = "provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection"
	snapshotClassName       = "mock-snapclass"
)

// restoreTest is the setting TestE2EProvisionerSnapshotRestore's subtests share: one control plane with the
// snapshot CRDs, a driver that can restore snapshots, the classes, and a running provisioner.
type restoreTest struct {
	setting
	snaps   snapclient.Interface
	creates *createRecorder
}

// TestE2EProvisionerSnapshotRestore restores claims from VolumeSnapshots on a real control plane with the
// snapshot.storage.k8s.io CRDs installed. No snapshot controller runs: the test pre-provisions each
// VolumeSnapshotContent and VolumeSnapshot and writes their status through the status subresource as the
// snapshot controller and csi-snapshotter would, so what is checked is the provisioner alone.
func TestE2EProvisionerSnapshotRestore(t *testing.T) {
	e := startRestoreTest(t)
	t.Run("ready snapshot: the claim is provisioned from its handle and the source protection is released", func(t *testing.T) { testRestoreReady(t, e) })
	t.Run("snapshot not ready: a Warning Event and no CreateVolume until it is ready", func(t *testing.T) { testRestoreNotReady(t, e) })
	t.Run("missing snapshot: a Warning Event naming it and no CreateVolume", func(t *testing.T) { testRestoreMissing(t, e) })
	t.Run("snapshot the driver does not have: its NotFound in a Warning Event; deleting the claim leaves nothing", func(t *testing.T) { testRestoreDriverLacksSnapshot(t, e) })
	t.Run("restore size larger than the claim: a Warning Event and no CreateVolume", func(t *testing.T) { testRestoreTooSmall(t, e) })
	t.Run("driver without CREATE_DELETE_SNAPSHOT: a Warning Event and no CreateVolume", func(t *testing.T) { testRestoreNoSnapshotCap(t, e) })
	t.Run("restored claims are deleted with their volumes", func(t *testing.T) { testRestoredClaimsDeleted(t, e) })
}

// startRestoreTest starts the control plane with the snapshot CRDs, the driver and csi-provisioner, and creates
// the StorageClass, VolumeSnapshotClass and namespace the subtests use.
func startRestoreTest(t *testing.T) *restoreTest {
	r := startRig(t, sidecarrig.Options{SnapshotCRDs: true})
	ctx := context.Background()
	kube, snaps := adminClient(t, r), r.Snap

	// Restoring needs CREATE_DELETE_SNAPSHOT (upstream refuses without it), which the mock leaves out by default.
	drv, err := csimock.Start(ctx, csimock.Options{Name: driverName, ControllerCaps: []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	creates := recordCreates(drv, kube, snaps)

	createClass(t, ctx, kube, storageClass("snap-restore", storagev1.VolumeBindingImmediate, nil))
	class := &snapv1.VolumeSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: snapshotClassName}, Driver: driverName, DeletionPolicy: snapv1.VolumeSnapshotContentRetain,
	}
	if _, err := snaps.SnapshotV1().VolumeSnapshotClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := "e2e-restore"
	createNamespace(t, ctx, kube, ns)
	startProvisioner(t, r, drv.Endpoint(), "--extra-create-metadata")
	return &restoreTest{setting: setting{r: r, kube: kube, drv: drv, ns: ns}, snaps: snaps, creates: creates}
}

func testRestoreReady(t *testing.T, e *restoreTest) {
	kube, snaps, drv, ns, creates := e.kube, e.snaps, e.drv, e.ns, e.creates
	handle := drv.AddSnapshot("ready", 1<<30).ID
	preProvisionSnapshot(t, snaps, ns, "ready", handle, "1Gi", true)
	pvc := createClaim(t, kube, restoreClaim(ns, "restored", "ready", "1Gi"))
	pv := waitBound(t, kube, pvc)
	if got, protected := creates.snapshotFor(pv.Name); got != handle || !protected {
		t.Errorf("CreateVolume for %s got content source snapshot %q (source protected: %v), want %q, protected", pv.Name, got, protected, handle)
	}
	if vol := driverVolume(t, drv, pv.Name); vol.ContentSource != "snapshot:"+handle {
		t.Errorf("driver volume content source %q, want snapshot:%s", vol.ContentSource, handle)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != driverName || pv.Spec.Capacity.Storage().Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("PV spec %+v", pv.Spec)
	}
	waitNoIntent(t, kube, pvc)
	waitSourceReleased(t, snaps, ns, "ready")
}

func testRestoreNotReady(t *testing.T, e *restoreTest) {
	ctx, kube, snaps, drv, ns, creates := context.Background(), e.kube, e.snaps, e.drv, e.ns, e.creates
	handle := drv.AddSnapshot("pending", 1<<30).ID
	preProvisionSnapshot(t, snaps, ns, "pending", handle, "1Gi", false)
	before := drv.Calls(csimock.CreateVolume)
	pvc := createClaim(t, kube, restoreClaim(ns, "from-pending", "pending", "1Gi"))
	waitEvent(t, kube, ns, pvc.Name, v1.EventTypeWarning, "ProvisioningFailed", "VolumeSnapshot "+ns+"/pending is not ready to use")
	if got := drv.Calls(csimock.CreateVolume) - before; got != 0 {
		t.Errorf("CreateVolume called %d times for a snapshot that is not ready", got)
	}
	if got, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{}); err != nil || got.Spec.VolumeName != "" || slices.Contains(got.Finalizers, intentKey) {
		t.Errorf("claim waiting for its snapshot: err %v volumeName %q finalizers %v", err, got.Spec.VolumeName, got.Finalizers)
	}

	// What csi-snapshotter and the snapshot controller do once the backend finished the snapshot. No event
	// tells the provisioner; its retry picks the snapshot up.
	setSnapshotReady(t, snaps, ns, "pending", true)
	pv := waitBound(t, kube, pvc)
	if got, protected := creates.snapshotFor(pv.Name); got != handle || !protected {
		t.Errorf("CreateVolume got content source snapshot %q (source protected: %v), want %q, protected", got, protected, handle)
	}
	waitSourceReleased(t, snaps, ns, "pending")
}

func testRestoreMissing(t *testing.T, e *restoreTest) {
	ctx, kube, drv, ns := context.Background(), e.kube, e.drv, e.ns
	before := drv.Calls(csimock.CreateVolume)
	pvc := createClaim(t, kube, restoreClaim(ns, "from-missing", "nosuch", "1Gi"))
	waitEvent(t, kube, ns, pvc.Name, v1.EventTypeWarning, "ProvisioningFailed", `volumesnapshots.snapshot.storage.k8s.io "nosuch" not found`)
	if got := drv.Calls(csimock.CreateVolume) - before; got != 0 {
		t.Errorf("CreateVolume called %d times for a missing snapshot", got)
	}
	if err := kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func testRestoreDriverLacksSnapshot(t *testing.T, e *restoreTest) {
	ctx, kube, snaps, drv, ns := context.Background(), e.kube, e.snaps, e.drv, e.ns
	preProvisionSnapshot(t, snaps, ns, "gone", "snap-gone", "1Gi", true)
	pvc := createClaim(t, kube, restoreClaim(ns, "from-gone", "gone", "1Gi"))
	waitEvent(t, kube, ns, pvc.Name, v1.EventTypeWarning, "ProvisioningFailed", `snapshot "snap-gone" not found`)
	if err := kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// CreateVolume failed for good (not a timeout), so no volume can exist: the intent is released.
	waitClaimGone(t, kube, pvc, 60*time.Second)
	if n := countVolumes(drv, "pvc-"+string(pvc.UID)); n != 0 {
		t.Errorf("driver holds %d volumes for the failed restore", n)
	}
}

func testRestoreTooSmall(t *testing.T, e *restoreTest) {
	ctx, kube, snaps, drv, ns := context.Background(), e.kube, e.snaps, e.drv, e.ns
	preProvisionSnapshot(t, snaps, ns, "big", drv.AddSnapshot("big", 2<<30).ID, "2Gi", true)
	before := drv.Calls(csimock.CreateVolume)
	pvc := createClaim(t, kube, restoreClaim(ns, "too-small", "big", "1Gi"))
	waitEvent(t, kube, ns, pvc.Name, v1.EventTypeWarning, "ProvisioningFailed", "smaller than VolumeSnapshot "+ns+"/big restore size")
	if got := drv.Calls(csimock.CreateVolume) - before; got != 0 {
		t.Errorf("CreateVolume called %d times for a claim smaller than the snapshot", got)
	}
	if got, err := snaps.SnapshotV1().VolumeSnapshots(ns).Get(ctx, "big", metav1.GetOptions{}); err != nil || slices.Contains(got.Finalizers, snapshotSourceFinalizer) {
		t.Errorf("refused restore left the as-source finalizer (err %v, finalizers %v)", err, got.Finalizers)
	}
	if err := kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func testRestoreNoSnapshotCap(t *testing.T, e *restoreTest) {
	ctx, kube, ns := context.Background(), e.kube, e.ns
	// A second driver with the mock's default capabilities (cloning, no snapshots) and its own provisioner.
	const noSnapDriver = "nosnap.csi.stowage.io"
	other, err := csimock.Start(ctx, csimock.Options{Name: noSnapDriver})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Stop)
	sc := storageClass("nosnap", storagev1.VolumeBindingImmediate, nil)
	sc.Provisioner = noSnapDriver
	createClass(t, ctx, kube, sc)
	startProvisioner(t, e.r, other.Endpoint())
	pvc := restoreClaim(ns, "from-nosnap", "ready", "1Gi")
	pvc.Spec.StorageClassName = &sc.Name
	pvc = createClaim(t, kube, pvc)
	waitEvent(t, kube, ns, pvc.Name, v1.EventTypeWarning, "ProvisioningFailed", "driver "+noSnapDriver+" does not support restoring from a VolumeSnapshot")
	if got := other.Calls(csimock.CreateVolume); got != 0 {
		t.Errorf("CreateVolume called %d times on a driver without snapshots", got)
	}
	if err := kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func testRestoredClaimsDeleted(t *testing.T, e *restoreTest) {
	kube, drv, ns := e.kube, e.drv, e.ns
	deleteClaimsWaitPVsGone(t, kube, ns, "restored", "from-pending")
	if vols := drv.Volumes(); len(vols) != 0 {
		t.Errorf("driver holds %d volumes after every restored claim was deleted: %+v", len(vols), vols)
	}
}

// createRecorder keeps, by volume name, the snapshot ID of every CreateVolume request as the driver received
// it, and whether the claim's VolumeSnapshot carried the as-source finalizer at that moment.
type createRecorder struct {
	mu        sync.Mutex
	snapshots map[string]string
	protected map[string]bool
}

// recordCreates installs the driver hook. It finds the claim through the pvc/name and pvc/namespace
// parameters, so the provisioner must run with --extra-create-metadata.
func recordCreates(drv *csimock.Driver, kube kubernetes.Interface, snaps snapclient.Interface) *createRecorder {
	r := &createRecorder{snapshots: map[string]string{}, protected: map[string]bool{}}
	drv.SetBeforeCall(func(ctx context.Context, method string, req any) error {
		cv, ok := req.(*csi.CreateVolumeRequest)
		if !ok || method != csimock.CreateVolume {
			return nil
		}
		protected := false
		ns, name := cv.GetParameters()["csi.storage.k8s.io/pvc/namespace"], cv.GetParameters()["csi.storage.k8s.io/pvc/name"]
		if pvc, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{}); err == nil && pvc.Spec.DataSource != nil {
			vs, err := snaps.SnapshotV1().VolumeSnapshots(ns).Get(ctx, pvc.Spec.DataSource.Name, metav1.GetOptions{})
			protected = err == nil && slices.Contains(vs.Finalizers, snapshotSourceFinalizer)
		}
		r.mu.Lock()
		r.snapshots[cv.GetName()] = cv.GetVolumeContentSource().GetSnapshot().GetSnapshotId()
		r.protected[cv.GetName()] = protected
		r.mu.Unlock()
		return nil
	})
	return r
}

// snapshotFor returns the snapshot ID CreateVolume got for volume and whether the source was protected then.
func (r *createRecorder) snapshotFor(volume string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshots[volume], r.protected[volume]
}

// restoreClaim is a claim of class snap-restore with the named VolumeSnapshot as its dataSource.
func restoreClaim(ns, name, snapshot, size string) *v1.PersistentVolumeClaim {
	pvc := claim(ns, name, "snap-restore", size)
	group := "snapshot.storage.k8s.io"
	pvc.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: snapshot}
	return pvc
}

// preProvisionSnapshot creates a VolumeSnapshot bound to a pre-provisioned VolumeSnapshotContent for handle,
// with the statuses the snapshot controller and csi-snapshotter would write; ready says whether the snapshot is
// ready to use yet. The content is named after the snapshot and retained, so it is deleted when the test's
// cluster goes.
func preProvisionSnapshot(t *testing.T, snaps snapclient.Interface, ns, name, handle, size string, ready bool) {
	t.Helper()
	ctx := context.Background()
	contentName := "content-" + ns + "-" + name
	class := snapshotClassName
	vs, err := snaps.SnapshotV1().VolumeSnapshots(ns).Create(ctx, &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: snapv1.VolumeSnapshotSpec{
			Source:                  snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &contentName},
			VolumeSnapshotClassName: &class,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, fs := handle, v1.PersistentVolumeFilesystem
	content, err := snaps.SnapshotV1().VolumeSnapshotContents().Create(ctx, &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: contentName},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef:       v1.ObjectReference{Kind: "VolumeSnapshot", APIVersion: "snapshot.storage.k8s.io/v1", Namespace: ns, Name: name, UID: vs.UID},
			DeletionPolicy:          snapv1.VolumeSnapshotContentRetain,
			Driver:                  driverName,
			VolumeSnapshotClassName: &class,
			Source:                  snapv1.VolumeSnapshotContentSource{SnapshotHandle: &h},
			SourceVolumeMode:        &fs,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := resource.MustParse(size)
	bytes, created := q.Value(), time.Now().UnixNano()
	content.Status = &snapv1.VolumeSnapshotContentStatus{
		SnapshotHandle: &h, CreationTime: &created, RestoreSize: &bytes, ReadyToUse: &ready,
	}
	if _, err := snaps.SnapshotV1().VolumeSnapshotContents().UpdateStatus(ctx, content, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	vs.Status = &snapv1.VolumeSnapshotStatus{
		BoundVolumeSnapshotContentName: &contentName, CreationTime: &now, RestoreSize: &q, ReadyToUse: &ready,
	}
	if _, err := snaps.SnapshotV1().VolumeSnapshots(ns).UpdateStatus(ctx, vs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// setSnapshotReady flips readyToUse on a snapshot and its content through their status subresources.
func setSnapshotReady(t *testing.T, snaps snapclient.Interface, ns, name string, ready bool) {
	t.Helper()
	ctx := context.Background()
	vs, err := snaps.SnapshotV1().VolumeSnapshots(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	content, err := snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, *vs.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	content.Status.ReadyToUse = &ready
	if _, err := snaps.SnapshotV1().VolumeSnapshotContents().UpdateStatus(ctx, content, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	vs.Status.ReadyToUse = &ready
	if _, err := snaps.SnapshotV1().VolumeSnapshots(ns).UpdateStatus(ctx, vs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitSourceReleased waits until the provisioner dropped its as-source finalizer from the snapshot.
func waitSourceReleased(t *testing.T, snaps snapclient.Interface, ns, name string) {
	t.Helper()
	rig.Eventually(t, context.Background(), 30*time.Second, "as-source finalizer released from VolumeSnapshot "+name, func(ctx context.Context) (bool, error) {
		vs, err := snaps.SnapshotV1().VolumeSnapshots(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && !slices.Contains(vs.Finalizers, snapshotSourceFinalizer), err
	})
}
