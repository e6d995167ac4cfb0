package ebsstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
	"github.com/stowage-csi/stowage/e2e/rig"
)

const (
	// pvcAsSource is upstream's finalizer on a claim being snapshotted (external-snapshotter pkg/utils).
	pvcAsSource   = "snapshot.storage.kubernetes.io/pvc-as-source-protection"
	snapshotClass = "stowage-ebs-snapclass"
	snapshotName  = "data-0-snap"
	restoredClaim = "restored-0"
	restoredPod   = "restore-reader"
	// sourceClaim is scenario 1's claim, whose volume holds data.bin.
	sourceClaim = "data-0"
)

// SnapshotSidecars are the Options.With entries scenario 4 needs: the snapshot is taken by Stowage's
// snapshot-controller and csi-snapshotter, not by the test.
var SnapshotSidecars = []string{"csi-snapshotter", "snapshot-controller"}

// SnapshotRestore is scenario 4 and needs scenario 1 (the volume of PVC data-0 holding data.bin) and
// SnapshotSidecars (Options.With, else started here): a VolumeSnapshotClass and a VolumeSnapshot of data-0 are
// created, snapshot-controller and csi-snapshotter take the EBS snapshot and bind it until readyToUse, a
// claim in node C's zone is restored from it by csi-provisioner, and a Pod on node C reads the same bytes.
// Everything is deleted again; deleting the VolumeSnapshot (policy Delete) must delete the EBS snapshot.
func (l *Lifecycle) SnapshotRestore(ctx context.Context) error {
	l.R.Scenario("4. Snapshot, restore in another zone, same bytes")
	if l.volumeID == "" || l.digest == "" {
		return fmt.Errorf("scenario 1 did not run")
	}
	if err := l.P.EnsureSnapshotting(ctx); err != nil {
		return err
	}
	snaps, err := snapclient.NewForConfig(l.P.RESTConfig())
	if err != nil {
		return err
	}
	r := &restore{l: l, snaps: snaps}
	return l.steps(ctx,
		step{"VolumeSnapshotClass and VolumeSnapshot of data-0 created", r.createSnapshot},
		step{"VolumeSnapshot readyToUse, EBS snapshot completed", r.waitReady},
		step{"PVC restored-0 Bound in node C's zone", r.restoreOnC},
		step{"same bytes read on node C", r.checkRestoredData},
		step{"restore and snapshot deleted, EBS snapshot gone", r.deleteAll})
}

// ensureSnapshotSidecars starts those of SnapshotSidecars the stack was started without (Options.With), as
// Start would have: built from the snapshotter module, under their ServiceAccounts and deploy/rbac manifests,
// with SidecarArgs, after the snapshot CRDs. They stop with the stack.
func (s *Stack) ensureSnapshotSidecars(ctx context.Context) error {
	var missing []string
	for _, name := range SnapshotSidecars {
		if s.Sidecar(name) == nil {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := rig.RepoRoot(wd)
	if err != nil {
		return err
	}
	bins := map[string]string{}
	for _, name := range missing {
		if err := s.Cluster.Apply(ctx, filepath.Join(root, "deploy", "rbac", name+".yaml")); err != nil {
			return err
		}
		kc, err := s.Cluster.ServiceAccountKubeconfig(ctx, rbacNamespace, name)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.Kubeconfigs[name] = kc
		s.mu.Unlock()
		if bins[name], err = rig.BuildCommand(ctx, root, Extras[name], name, filepath.Join(s.Dir, "bin")); err != nil {
			return fmt.Errorf("build %s: %w", name, err)
		}
	}
	return s.startExtras(ctx, bins, missing)
}

// restore is scenario 4's state: the snapshot client, the VolumeSnapshot's content and its EBS snapshot.
type restore struct {
	l          *Lifecycle
	snaps      snapclient.Interface
	content    string
	snapshotID string
}

// createSnapshot creates the class (policy Delete, so deleting the VolumeSnapshot deletes the EBS snapshot)
// and the VolumeSnapshot of data-0.
func (r *restore) createSnapshot(ctx context.Context) (string, error) {
	api := r.snaps.SnapshotV1()
	if _, err := api.VolumeSnapshotClasses().Create(ctx, &snapv1.VolumeSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: snapshotClass}, Driver: Driver, DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	class, claim := snapshotClass, sourceClaim
	if _, err := api.VolumeSnapshots(Namespace).Create(ctx, &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: snapshotName},
		Spec: snapv1.VolumeSnapshotSpec{
			Source:                  snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim},
			VolumeSnapshotClassName: &class,
		},
	}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	return fmt.Sprintf("VolumeSnapshotClass %s (%s, Delete), VolumeSnapshot %s of PVC %s", snapshotClass, Driver, snapshotName, sourceClaim), nil
}

// waitReady waits until the VolumeSnapshot is bound and readyToUse, then checks EC2's record of the snapshot:
// of data-0's volume, completed, named by csi-snapshotter (snapshot-<VolumeSnapshot UID>). The file was
// fsynced through the mounted file system, so a crash-consistent snapshot holds it.
func (r *restore) waitReady(ctx context.Context) (string, error) {
	l := r.l
	var vs *snapv1.VolumeSnapshot
	err := poll(ctx, "VolumeSnapshot "+snapshotName+" readyToUse", func(ctx context.Context) (bool, string, error) {
		var err error
		if vs, err = r.snaps.SnapshotV1().VolumeSnapshots(Namespace).Get(ctx, snapshotName, metav1.GetOptions{}); err != nil {
			return false, "", err
		}
		st := vs.Status
		if st == nil || st.BoundVolumeSnapshotContentName == nil || st.ReadyToUse == nil || !*st.ReadyToUse {
			return false, fmt.Sprintf("status %+v", st), nil
		}
		return true, "", nil
	})
	if err != nil {
		return "", err
	}
	r.content = *vs.Status.BoundVolumeSnapshotContentName
	content, err := r.snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, r.content, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if content.Status == nil || content.Status.SnapshotHandle == nil {
		return "", fmt.Errorf("VolumeSnapshotContent %s has no snapshotHandle", r.content)
	}
	r.snapshotID = *content.Status.SnapshotHandle
	st, err := l.ec2Snapshot(r.snapshotID)
	if err != nil {
		return "", err
	}
	if want := "snapshot-" + string(vs.UID); st.VolumeID != l.volumeID || st.State != "completed" || st.Tags["CSIVolumeSnapshotName"] != want {
		return "", fmt.Errorf("EC2 snapshot %s: volume %s, state %s, tags %v; want volume %s, completed, CSIVolumeSnapshotName %s",
			st.ID, st.VolumeID, st.State, st.Tags, l.volumeID, want)
	}
	size := "unset"
	if vs.Status.RestoreSize != nil {
		size = vs.Status.RestoreSize.String()
	}
	return fmt.Sprintf("VolumeSnapshot %s bound to %s, readyToUse, restoreSize %s; EBS snapshot %s of %s (%d GiB) completed",
		snapshotName, r.content, size, st.ID, l.volumeID, st.SizeGiB), nil
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
	if zone := l.zone(l.NodeC); vol.SnapshotID != r.snapshotID || vol.Zone != zone {
		return "", fmt.Errorf("restored volume %s: from snapshot %q in %s, want %s in %s", vol.ID, vol.SnapshotID, vol.Zone, r.snapshotID, zone)
	}
	return fmt.Sprintf("PVC %s Bound to %s (EBS %s from %s, in %s)", restoredClaim, pv.Name, vol.ID, vol.SnapshotID, vol.Zone), nil
}

// checkRestoredData waits for the restore's Pod to run and compares its data.bin with what scenario 1 wrote.
func (r *restore) checkRestoredData(ctx context.Context) (string, error) {
	l := r.l
	pod, err := l.waitRunning(ctx, restoredPod)
	if err != nil {
		return "", err
	}
	c, err := l.P.KubeClient().CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, restoredClaim, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(l.node(l.NodeC).PublishPath(string(pod.UID), c.Spec.VolumeName), "data.bin"))
	if err != nil {
		return "", err
	}
	if got := digest(b); got != l.digest {
		return "", fmt.Errorf("restored data.bin has sha256 %s, written %s", got, l.digest)
	}
	return fmt.Sprintf("Pod %s Running on %s reads /data/data.bin: same %d bytes (sha256 %s)", restoredPod, l.NodeC, len(b), l.digest[:12]), nil
}

// deleteAll deletes the restore, then the VolumeSnapshot: snapshot-controller deletes its content and
// csi-snapshotter the EBS snapshot, which must be gone from EC2. The claim data-0 must have been released
// (pvc-as-source-protection removed) once its snapshot was ready.
func (r *restore) deleteAll(ctx context.Context) (string, error) {
	if err := r.l.deleteRestore(ctx); err != nil {
		return "", err
	}
	c, err := r.l.P.KubeClient().CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, sourceClaim, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if slices.Contains(c.Finalizers, pvcAsSource) {
		return "", fmt.Errorf("PVC %s still carries %s after its snapshot was ready", sourceClaim, pvcAsSource)
	}
	api := r.snaps.SnapshotV1()
	if err := api.VolumeSnapshots(Namespace).Delete(ctx, snapshotName, metav1.DeleteOptions{}); err != nil {
		return "", err
	}
	err = poll(ctx, "VolumeSnapshot, content and EBS snapshot "+r.snapshotID+" gone", func(ctx context.Context) (bool, string, error) {
		if _, err := api.VolumeSnapshots(Namespace).Get(ctx, snapshotName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, "VolumeSnapshot still there", nil
		}
		if _, err := api.VolumeSnapshotContents().Get(ctx, r.content, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, "VolumeSnapshotContent still there", nil
		}
		if st, err := r.l.ec2Snapshot(r.snapshotID); err == nil {
			return false, "EBS snapshot " + st.State, nil
		}
		return true, "", nil
	})
	if err != nil {
		return "", err
	}
	if err := api.VolumeSnapshotClasses().Delete(ctx, snapshotClass, metav1.DeleteOptions{}); err != nil {
		return "", err
	}
	return fmt.Sprintf("Pod, PVC %s and its volume, VolumeSnapshot, content %s, class and EBS snapshot %s deleted", restoredClaim, r.content, r.snapshotID), nil
}

// deleteRestore deletes the restore's Pod and claim, waiting until its PV and EBS volume are gone.
func (l *Lifecycle) deleteRestore(ctx context.Context) error {
	kube := l.P.KubeClient()
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
		for _, v := range l.P.EC2().State().Volumes {
			if v.Tags["CSIVolumeName"] == pv {
				return false, "EBS volume " + v.ID + " " + v.State, nil
			}
		}
		return true, "", nil
	})
	return err
}

// ec2Snapshot is the emulator's record of snapshot id, or an error if it holds none.
func (l *Lifecycle) ec2Snapshot(id string) (ec2sim.SnapshotState, error) {
	for _, sn := range l.P.EC2().State().Snapshots {
		if sn.ID == id {
			return sn, nil
		}
	}
	return ec2sim.SnapshotState{}, fmt.Errorf("EC2 holds no snapshot %s", id)
}
