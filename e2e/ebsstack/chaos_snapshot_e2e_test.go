//go:build e2e

package ebsstack

import (
	"context"
	"fmt"
	"slices"
	"strings"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// chaosSnapshotter is how the chaos run snapshots: through Stowage's snapshot-controller and csi-snapshotter
// (Options.With SnapshotSidecars), with VolumeSnapshots of class snapshotClass (policy Delete).
type chaosSnapshotter struct {
	s     *Stack
	snaps snapclient.Interface
}

// newChaosSnapshotter makes the snapshot client and the VolumeSnapshotClass.
func newChaosSnapshotter(ctx context.Context, s *Stack) (*chaosSnapshotter, error) {
	snaps, err := snapclient.NewForConfig(s.Cluster.RESTConfig())
	if err != nil {
		return nil, err
	}
	if _, err := snaps.SnapshotV1().VolumeSnapshotClasses().Create(ctx, &snapv1.VolumeSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: snapshotClass}, Driver: Driver, DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	return &chaosSnapshotter{s: s, snaps: snaps}, nil
}

// run snapshots each claim (a VolumeSnapshot named prefix+claim) and waits until every one is readyToUse,
// while the caller's kills and EC2's faults go on: snapshot-controller must bind each to one content and
// csi-snapshotter take one EBS snapshot for it, a retried, adopted or answer-lost CreateSnapshot included. So
// EC2 must then hold exactly one snapshot of each claim's volume, the handle of its content. Then the
// VolumeSnapshots are deleted and every one, its content and its EBS snapshot must go.
func (c *chaosSnapshotter) run(ctx context.Context, prefix string, claims []string) error {
	volumes := map[string]string{} // EBS volume ID -> claim
	for _, claim := range claims {
		id, err := c.volumeOf(ctx, claim)
		if err != nil {
			return err
		}
		volumes[id] = claim
	}
	api := c.snaps.SnapshotV1().VolumeSnapshots(Namespace)
	class := snapshotClass
	for _, claim := range claims {
		if _, err := api.Create(ctx, &snapv1.VolumeSnapshot{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: prefix + claim},
			Spec: snapv1.VolumeSnapshotSpec{
				Source:                  snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim},
				VolumeSnapshotClassName: &class,
			},
		}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	handles, err := c.waitReady(ctx, prefix, claims)
	if err != nil {
		return err
	}
	if err := c.checkOnePerVolume(volumes, handles); err != nil {
		return err
	}
	for _, claim := range claims {
		if err := api.Delete(ctx, prefix+claim, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return poll(ctx, "VolumeSnapshots "+prefix+"*, their contents and EBS snapshots deleted", func(ctx context.Context) (bool, string, error) {
		left, err := c.leftovers(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, sn := range c.s.EC2.State().Snapshots {
			left = append(left, "EBS snapshot "+sn.ID+" of "+sn.VolumeID)
		}
		return len(left) == 0, "left: " + strings.Join(left, ", "), nil
	})
}

// volumeOf is the EBS volume ID of a bound claim.
func (c *chaosSnapshotter) volumeOf(ctx context.Context, claim string) (string, error) {
	pvc, err := c.s.Client.CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	pv, err := c.s.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("PV of claim %s: %w", claim, err)
	}
	if pv.Spec.CSI == nil {
		return "", fmt.Errorf("PV %s of claim %s is not a CSI volume", pv.Name, claim)
	}
	return pv.Spec.CSI.VolumeHandle, nil
}

// waitReady waits until the VolumeSnapshot of every claim is bound and readyToUse, and returns their
// contents' snapshot handles by claim. An error in a status is only reported while waiting: under the
// chaos the controllers retry it.
func (c *chaosSnapshotter) waitReady(ctx context.Context, prefix string, claims []string) (map[string]string, error) {
	handles := map[string]string{}
	err := poll(ctx, fmt.Sprintf("%d VolumeSnapshots readyToUse", len(claims)), func(ctx context.Context) (bool, string, error) {
		list, err := c.snaps.SnapshotV1().VolumeSnapshots(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		contents, err := c.snaps.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		handleOf := map[string]string{}
		for _, vsc := range contents.Items {
			if vsc.Status != nil && vsc.Status.SnapshotHandle != nil {
				handleOf[vsc.Name] = *vsc.Status.SnapshotHandle
			}
		}
		var waiting []string
		for _, claim := range claims {
			i := slices.IndexFunc(list.Items, func(vs snapv1.VolumeSnapshot) bool { return vs.Name == prefix+claim })
			if i < 0 {
				return false, "", fmt.Errorf("VolumeSnapshot %s%s is gone", prefix, claim)
			}
			st := list.Items[i].Status
			switch {
			case st == nil || st.BoundVolumeSnapshotContentName == nil:
				waiting = append(waiting, claim+": unbound"+statusError(st))
			case st.ReadyToUse == nil || !*st.ReadyToUse || handleOf[*st.BoundVolumeSnapshotContentName] == "":
				waiting = append(waiting, claim+": not ready"+statusError(st))
			default:
				handles[claim] = handleOf[*st.BoundVolumeSnapshotContentName]
			}
		}
		return len(waiting) == 0, fmt.Sprintf("%d waiting: %s", len(waiting), strings.Join(waiting, "; ")), nil
	})
	return handles, err
}

// statusError is a VolumeSnapshot status's error message, for a wait's report.
func statusError(st *snapv1.VolumeSnapshotStatus) string {
	if st == nil || st.Error == nil || st.Error.Message == nil {
		return ""
	}
	return " (" + *st.Error.Message + ")"
}

// checkOnePerVolume checks that EC2 holds exactly one snapshot per volume, each the handle of its claim's
// content: a second one would be a retried CreateSnapshot that did not find the first.
func (c *chaosSnapshotter) checkOnePerVolume(volumes map[string]string, handles map[string]string) error {
	var got []string
	for _, sn := range c.s.EC2.State().Snapshots {
		got = append(got, sn.ID+" of "+sn.VolumeID)
		claim, ok := volumes[sn.VolumeID]
		if !ok {
			return fmt.Errorf("EC2 holds snapshot %s of %s, which is no snapshotted claim's volume", sn.ID, sn.VolumeID)
		}
		if handles[claim] != sn.ID {
			return fmt.Errorf("EC2 holds snapshot %s of %s (claim %s), whose content names %s: a retry made a second one", sn.ID, sn.VolumeID, claim, handles[claim])
		}
	}
	if len(got) != len(volumes) {
		return fmt.Errorf("EC2 holds snapshots %v, want one of each of the %d volumes", got, len(volumes))
	}
	return nil
}

// leftovers names every VolumeSnapshot and VolumeSnapshotContent, with its deletion state.
func (c *chaosSnapshotter) leftovers(ctx context.Context) ([]string, error) {
	list, err := c.snaps.SnapshotV1().VolumeSnapshots(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	contents, err := c.snaps.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	left := objectNames(list.Items, func(vs snapv1.VolumeSnapshot) string {
		return "VolumeSnapshot " + vs.Name + deleting(vs.DeletionTimestamp, vs.Finalizers)
	})
	return append(left, objectNames(contents.Items, func(vsc snapv1.VolumeSnapshotContent) string {
		return "VolumeSnapshotContent " + vsc.Name + deleting(vsc.DeletionTimestamp, vsc.Finalizers)
	})...), nil
}

// deleting describes an object being deleted and what holds it.
func deleting(at *metav1.Time, finalizers []string) string {
	if at == nil {
		return ""
	}
	return fmt.Sprintf(" (Terminating, finalizers %v)", finalizers)
}
