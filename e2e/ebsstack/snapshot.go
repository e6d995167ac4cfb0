package ebsstack

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

const (
	snapshotClass   = "stowage-ebs-snapclass"
	snapshotName    = "data-0-snap"
	snapshotContent = "snapcontent-data-0"
	// snapshotCSIName is what csi-snapshotter would name the snapshot in CreateSnapshot (snapshot-<VS UID>).
	snapshotCSIName = "snapshot-data-0"
	restoredClaim   = "restored-0"
	restoredPod     = "restore-reader"
	snapshotSource  = "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection"
)

// SnapshotRestore is scenario 4 and needs scenario 1 (the volume of PVC data-0 holding data.bin): the volume
// is snapshotted through ebs-plugin's CSI controller as csi-snapshotter would do it, the snapshot is
// pre-provisioned as a VolumeSnapshotContent and VolumeSnapshot (statuses written as the snapshot controller
// would; none runs here), a claim in node C's zone is restored from it by csi-provisioner, and a Pod on node C
// reads the same bytes. Everything it made is deleted again, the EBS snapshot last.
func (l *Lifecycle) SnapshotRestore(ctx context.Context) error {
	l.R.Scenario("4. Snapshot, restore in another zone, same bytes")
	if l.volumeID == "" || l.digest == "" {
		return fmt.Errorf("scenario 1 did not run")
	}
	snaps, err := snapclient.NewForConfig(l.S.Cluster.RESTConfig())
	if err != nil {
		return err
	}
	ctrl, closeCtrl, err := dialController(l.S.ControllerSocket)
	if err != nil {
		return err
	}
	defer closeCtrl()
	r := &restore{l: l, snaps: snaps, ctrl: ctrl}
	return l.steps(ctx, step{"snapshot CRDs installed", func(ctx context.Context) (string, error) {
		if err := l.S.Cluster.InstallSnapshotCRDs(ctx); err != nil {
			return "", err
		}
		return "VolumeSnapshotClass, VolumeSnapshotContent and VolumeSnapshot CRDs Established", nil
	}},
		step{"CreateSnapshot of data-0 until ready", r.createSnapshot},
		step{"VolumeSnapshotContent and VolumeSnapshot pre-provisioned", func(ctx context.Context) (string, error) {
			if err := preProvision(ctx, snaps, r.snap); err != nil {
				return "", err
			}
			return fmt.Sprintf("VolumeSnapshot %s bound to %s (handle %s), readyToUse, restoreSize %d",
				snapshotName, snapshotContent, r.snap.GetSnapshotId(), r.snap.GetSizeBytes()), nil
		}},
		step{"PVC restored-0 Bound in node C's zone", r.restoreOnC},
		step{"same bytes read on node C", r.checkRestoredData},
		step{"restore and snapshot deleted", r.deleteAll})
}

// restore is scenario 4's state: the snapshot clients and the snapshot once made.
type restore struct {
	l     *Lifecycle
	snaps snapclient.Interface
	ctrl  csi.ControllerClient
	snap  *csi.Snapshot
}

// createSnapshot repeats CreateSnapshot of data-0's volume with the same name until the snapshot is ready,
// as csi-snapshotter does, and checks EC2's record of it. The file was fsynced through the mounted file
// system, so a crash-consistent snapshot holds it.
func (r *restore) createSnapshot(ctx context.Context) (string, error) {
	l := r.l
	req := &csi.CreateSnapshotRequest{Name: snapshotCSIName, SourceVolumeId: l.volumeID, Parameters: map[string]string{
		"csi.storage.k8s.io/volumesnapshot/name":        snapshotName,
		"csi.storage.k8s.io/volumesnapshot/namespace":   Namespace,
		"csi.storage.k8s.io/volumesnapshotcontent/name": snapshotContent,
	}}
	calls := 0
	err := poll(ctx, "snapshot of "+l.volumeID+" ready", func(ctx context.Context) (bool, string, error) {
		calls++
		resp, err := r.ctrl.CreateSnapshot(ctx, req)
		if err != nil {
			return false, "", fmt.Errorf("CreateSnapshot: %w", err)
		}
		r.snap = resp.GetSnapshot()
		return r.snap.GetReadyToUse(), fmt.Sprintf("snapshot %s not ready", r.snap.GetSnapshotId()), nil
	})
	if err != nil {
		return "", err
	}
	if r.snap.GetSourceVolumeId() != l.volumeID {
		return "", fmt.Errorf("snapshot %s is of volume %s, want %s", r.snap.GetSnapshotId(), r.snap.GetSourceVolumeId(), l.volumeID)
	}
	st, err := l.ec2Snapshot(r.snap.GetSnapshotId())
	if err != nil {
		return "", err
	}
	if st.VolumeID != l.volumeID || st.Tags["CSIVolumeSnapshotName"] != snapshotCSIName {
		return "", fmt.Errorf("EC2 snapshot %s: volume %s, tags %v", st.ID, st.VolumeID, st.Tags)
	}
	return fmt.Sprintf("EBS snapshot %s of %s (%d GiB) completed after %d CreateSnapshot calls", st.ID, l.volumeID, st.SizeGiB, calls), nil
}

// restoreOnC creates a claim from the VolumeSnapshot for node C and a Pod using it, and waits until the
// claim is Bound to a volume made from the snapshot in C's zone.
func (r *restore) restoreOnC(ctx context.Context) (string, error) {
	l := r.l
	claim := Claim(restoredClaim, "stowage-ext4", "1Gi", l.NodeC, false)
	group := snapv1.GroupName
	claim.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: snapshotName}
	if _, err := l.create(ctx, nil, claim, Pod(restoredPod, l.NodeC, restoredClaim, false)); err != nil {
		return "", err
	}
	pv, vol, err := l.waitBound(ctx, restoredClaim)
	if err != nil {
		return "", err
	}
	if zone := l.S.Nodes[l.NodeC].Spec.Zone; vol.SnapshotID != r.snap.GetSnapshotId() || vol.Zone != zone {
		return "", fmt.Errorf("restored volume %s: from snapshot %q in %s, want %s in %s", vol.ID, vol.SnapshotID, vol.Zone, r.snap.GetSnapshotId(), zone)
	}
	return fmt.Sprintf("PVC %s Bound to %s (EBS %s from %s, in %s)", restoredClaim, pv.Name, vol.ID, vol.SnapshotID, vol.Zone), nil
}

// checkRestoredData waits for the restore's Pod to run, compares its data.bin with what scenario 1 wrote,
// and checks that the VolumeSnapshot no longer carries the as-source protection finalizer.
func (r *restore) checkRestoredData(ctx context.Context) (string, error) {
	l := r.l
	pod, err := l.waitRunning(ctx, restoredPod)
	if err != nil {
		return "", err
	}
	c, err := l.S.Client.CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, restoredClaim, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(l.S.Nodes[l.NodeC].Kubelet.PublishPath(string(pod.UID), c.Spec.VolumeName), "data.bin"))
	if err != nil {
		return "", err
	}
	if got := digest(b); got != l.digest {
		return "", fmt.Errorf("restored data.bin has sha256 %s, written %s", got, l.digest)
	}
	vs, err := r.snaps.SnapshotV1().VolumeSnapshots(Namespace).Get(ctx, snapshotName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if slices.Contains(vs.Finalizers, snapshotSource) {
		return "", fmt.Errorf("VolumeSnapshot %s still carries %s after the restore finished", snapshotName, snapshotSource)
	}
	return fmt.Sprintf("Pod %s Running on %s reads /data/data.bin: same %d bytes (sha256 %s)", restoredPod, l.NodeC, len(b), l.digest[:12]), nil
}

// deleteAll deletes the restore and the snapshot objects, then the EBS snapshot, which must be gone from EC2.
func (r *restore) deleteAll(ctx context.Context) (string, error) {
	if err := r.l.deleteRestore(ctx, r.snaps); err != nil {
		return "", err
	}
	id := r.snap.GetSnapshotId()
	if _, err := r.ctrl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: id}); err != nil {
		return "", fmt.Errorf("DeleteSnapshot %s: %w", id, err)
	}
	if _, err := r.l.ec2Snapshot(id); err == nil {
		return "", fmt.Errorf("EBS snapshot %s still exists after DeleteSnapshot", id)
	}
	return fmt.Sprintf("Pod, PVC %s and its volume, VolumeSnapshot, content and EBS snapshot %s deleted", restoredClaim, id), nil
}

// preProvision creates the VolumeSnapshotClass, a VolumeSnapshot naming a retained VolumeSnapshotContent for
// snap, and the content, then writes both statuses through the status subresource.
func preProvision(ctx context.Context, snaps snapclient.Interface, snap *csi.Snapshot) error {
	api := snaps.SnapshotV1()
	if _, err := api.VolumeSnapshotClasses().Create(ctx, &snapv1.VolumeSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: snapshotClass}, Driver: Driver, DeletionPolicy: snapv1.VolumeSnapshotContentRetain,
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	contentName, class := snapshotContent, snapshotClass
	vs, err := api.VolumeSnapshots(Namespace).Create(ctx, &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: snapshotName},
		Spec: snapv1.VolumeSnapshotSpec{
			Source:                  snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &contentName},
			VolumeSnapshotClassName: &class,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	handle, fs := snap.GetSnapshotId(), v1.PersistentVolumeFilesystem
	content, err := api.VolumeSnapshotContents().Create(ctx, &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: contentName},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef:       v1.ObjectReference{Kind: "VolumeSnapshot", APIVersion: snapv1.SchemeGroupVersion.String(), Namespace: Namespace, Name: snapshotName, UID: vs.UID},
			DeletionPolicy:          snapv1.VolumeSnapshotContentRetain,
			Driver:                  Driver,
			VolumeSnapshotClassName: &class,
			Source:                  snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle},
			SourceVolumeMode:        &fs,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	ready, size, created := true, snap.GetSizeBytes(), snap.GetCreationTime().AsTime()
	createdNano := created.UnixNano()
	content.Status = &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, CreationTime: &createdNano, RestoreSize: &size, ReadyToUse: &ready}
	if _, err := api.VolumeSnapshotContents().UpdateStatus(ctx, content, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("VolumeSnapshotContent %s status: %w", contentName, err)
	}
	restoreSize := resource.NewQuantity(size, resource.BinarySI)
	createdAt := metav1.NewTime(created)
	vs.Status = &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &contentName, CreationTime: &createdAt, RestoreSize: restoreSize, ReadyToUse: &ready}
	if _, err := api.VolumeSnapshots(Namespace).UpdateStatus(ctx, vs, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("VolumeSnapshot %s status: %w", snapshotName, err)
	}
	return nil
}

// deleteRestore deletes the restore's Pod and claim (waiting until its PV and EBS volume are gone), then the
// VolumeSnapshot, its content and the class.
func (l *Lifecycle) deleteRestore(ctx context.Context, snaps snapclient.Interface) error {
	kube := l.S.Client
	if err := kube.CoreV1().Pods(Namespace).Delete(ctx, restoredPod, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := l.waitPodGone(ctx, restoredPod); err != nil {
		return err
	}
	c, err := kube.CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, restoredClaim, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := kube.CoreV1().PersistentVolumeClaims(Namespace).Delete(ctx, restoredClaim, metav1.DeleteOptions{}); err != nil {
		return err
	}
	pv := c.Spec.VolumeName
	err = poll(ctx, "PV "+pv+" and its EBS volume gone", func(ctx context.Context) (bool, string, error) {
		got, err := kube.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, "", err
		}
		if err == nil {
			return false, "PV " + string(got.Status.Phase), nil
		}
		for _, v := range l.S.EC2.State().Volumes {
			if v.Tags["CSIVolumeName"] == pv {
				return false, "EBS volume " + v.ID + " " + v.State, nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		return err
	}
	api := snaps.SnapshotV1()
	if err := api.VolumeSnapshots(Namespace).Delete(ctx, snapshotName, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := api.VolumeSnapshotContents().Delete(ctx, snapshotContent, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return api.VolumeSnapshotClasses().Delete(ctx, snapshotClass, metav1.DeleteOptions{})
}

// ec2Snapshot is the emulator's record of snapshot id, or an error if it holds none.
func (l *Lifecycle) ec2Snapshot(id string) (ec2sim.SnapshotState, error) {
	for _, sn := range l.S.EC2.State().Snapshots {
		if sn.ID == id {
			return sn, nil
		}
	}
	return ec2sim.SnapshotState{}, fmt.Errorf("EC2 holds no snapshot %s", id)
}

// dialController connects to ebs-plugin's controller socket, as csi-snapshotter would.
func dialController(sock string) (csi.ControllerClient, func(), error) {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "unix", sock)
		}))
	if err != nil {
		return nil, nil, fmt.Errorf("dial %s: %w", sock, err)
	}
	return csi.NewControllerClient(conn), func() { _ = conn.Close() }, nil
}
