//go:build e2e

package ebsstack

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/kubeletsim"
	"github.com/stowage-csi/stowage/e2e/rig"
)

// checkRunning waits until every claim is Bound and its Pod Running, and checks that each volume is in its
// node's zone, attached in EC2 to exactly its node's instance, with one attached VolumeAttachment to that
// node and none elsewhere, staged and published as ext4, and that EC2 holds no other volume. It returns the
// claims' volumes: EBS volume ID -> node.
func (r *chaosRun) checkRunning(ctx context.Context, t *testing.T) map[string]string {
	t.Helper()
	volumes := map[string]string{}
	for _, claim := range slices.Sorted(maps.Keys(r.claimNode)) {
		node := r.claimNode[claim]
		pod, pv := r.waitInUse(ctx, t, claim)
		volID := pv.Spec.CSI.VolumeHandle
		volumes[volID] = node
		r.checkAttachedOnlyTo(ctx, t, pv, node)
		k := OnStack(r.s.Stack).Node(node)
		if err := checkFSType(k, "staging path of "+volID, k.StagingPath(volID), "ext4"); err != nil {
			t.Errorf("claim %s: %v", claim, err)
		}
		if err := checkFSType(k, "publish path of "+claim, k.PublishPath(string(pod.UID), pv.Name), "ext4"); err != nil {
			t.Errorf("claim %s: %v", claim, err)
		}
	}
	r.waitOnlyVolumes(ctx, t, volumes)
	return volumes
}

// waitInUse waits for the Pod of claim to run and returns it with the claim's PV.
func (r *chaosRun) waitInUse(ctx context.Context, t *testing.T, claim string) (*v1.Pod, *v1.PersistentVolume) {
	t.Helper()
	kube := r.s.Client
	var pod *v1.Pod
	rig.Eventually(t, ctx, chaosConverge, "Pod pod-"+claim+" Running on "+r.claimNode[claim], func(ctx context.Context) (bool, error) {
		var err error
		if pod, err = kube.CoreV1().Pods(Namespace).Get(ctx, "pod-"+claim, metav1.GetOptions{}); err != nil {
			return false, err
		}
		return pod.Status.Phase == v1.PodRunning, fmt.Errorf("phase %s", pod.Status.Phase)
	})
	c, err := kube.CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, claim, metav1.GetOptions{})
	if err != nil || c.Status.Phase != v1.ClaimBound {
		t.Fatalf("claim %s: %v (%v), want Bound", claim, c.Status.Phase, err)
	}
	pv, err := kube.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.CSI == nil {
		t.Fatalf("PV %s of %s: %v", c.Spec.VolumeName, claim, err)
	}
	return pod, pv
}

// checkAttachedOnlyTo waits until EC2 shows pv's volume attached to node's instance and to no other, then
// checks its zone and that the only VolumeAttachment of pv is the attached one to node.
func (r *chaosRun) checkAttachedOnlyTo(ctx context.Context, t *testing.T, pv *v1.PersistentVolume, node string) {
	t.Helper()
	volID, spec := pv.Spec.CSI.VolumeHandle, r.s.Nodes[node].Spec
	rig.Eventually(t, ctx, chaosConverge, volID+" attached to "+node+" only", func(context.Context) (bool, error) {
		var atts []string
		ok := false
		for _, a := range r.s.EC2.State().Attachments {
			if a.VolumeID == volID {
				atts = append(atts, a.InstanceID+"/"+a.State)
				ok = a.InstanceID == spec.InstanceID && a.State == "attached" && a.LoopDevice != ""
			}
		}
		return ok && len(atts) == 1, fmt.Errorf("EC2 attachments %v", atts)
	})
	for _, v := range r.s.EC2.State().Volumes {
		if v.ID == volID && v.Zone != spec.Zone {
			t.Errorf("%s is in %s, node %s in %s", volID, v.Zone, node, spec.Zone)
		}
	}
	vas, err := r.s.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := AttachmentName(volID, node)
	for _, va := range vas.Items {
		if va.Spec.Source.PersistentVolumeName == nil || *va.Spec.Source.PersistentVolumeName != pv.Name {
			continue
		}
		if va.Spec.NodeName != node || !va.Status.Attached || va.Name != want {
			t.Errorf("VolumeAttachment %s of %s: node %s, attached %v; want only %s on %s, attached",
				va.Name, pv.Name, va.Spec.NodeName, va.Status.Attached, want, node)
		}
	}
}

// waitOnlyVolumes waits until EC2 holds exactly the claims' volumes and no claim but the Pods' is left: the
// abandoned claims' volumes (if any was made) and every retried CreateVolume must leave nothing beside them.
func (r *chaosRun) waitOnlyVolumes(ctx context.Context, t *testing.T, volumes map[string]string) {
	t.Helper()
	rig.Eventually(t, ctx, chaosConverge, "EC2 volumes to be exactly the claims'", func(ctx context.Context) (bool, error) {
		var extra []string
		st := r.s.EC2.State()
		for _, v := range st.Volumes {
			if _, ok := volumes[v.ID]; !ok {
				extra = append(extra, fmt.Sprintf("%s(%s, %s)", v.ID, v.State, v.Tags["CSIVolumeName"]))
			}
		}
		claims, err := r.s.Client.CoreV1().PersistentVolumeClaims(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(extra) == 0 && len(claims.Items) == len(r.claimNode) && len(st.Volumes) == len(volumes),
			fmt.Errorf("%d claims, extra volumes %v", len(claims.Items), extra)
	})
}

// waitEmpty waits until no Pod, claim, PV, VolumeAttachment, VolumeSnapshot or VolumeSnapshotContent is left
// and EC2 holds no volume, attachment or snapshot, then checks that no loop device or mount is left.
func (r *chaosRun) waitEmpty(ctx context.Context, t *testing.T) {
	t.Helper()
	rig.Eventually(t, ctx, chaosConverge, "everything deleted", func(ctx context.Context) (bool, error) {
		left, err := r.leftovers(ctx)
		if err != nil {
			return false, err
		}
		return len(left) == 0, fmt.Errorf("left: %s", strings.Join(left, ", "))
	})
	if loops := LoopDevicesUnder(r.s.dir); len(loops) > 0 {
		t.Errorf("loop devices left after deletion: %v", loops)
	}
	for _, name := range r.s.NodeOrder {
		if mounts, err := kubeletsim.MountsUnder(r.s.Nodes[name].Kubelet.RootDir()); err != nil || len(mounts) > 0 {
			t.Errorf("mounts left on %s after deletion: %v (%v)", name, mounts, err)
		}
	}
}

// leftovers names every Pod, claim, PV, VolumeAttachment, VolumeSnapshot and VolumeSnapshotContent, and every
// EBS volume, attachment and snapshot.
func (r *chaosRun) leftovers(ctx context.Context) ([]string, error) {
	kube := r.s.Client
	pods, err := kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	claims, err := kube.CoreV1().PersistentVolumeClaims(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	vas, err := kube.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	left := objectNames(pods.Items, func(p v1.Pod) string { return "Pod " + p.Name })
	left = append(left, objectNames(claims.Items, func(c v1.PersistentVolumeClaim) string {
		if c.DeletionTimestamp != nil {
			return "claim " + c.Name + " (Terminating)"
		}
		return "claim " + c.Name
	})...)
	left = append(left, objectNames(pvs.Items, func(pv v1.PersistentVolume) string {
		return "PV " + pv.Name + " (" + string(pv.Status.Phase) + ")"
	})...)
	left = append(left, objectNames(vas.Items, func(va storagev1.VolumeAttachment) string { return "VolumeAttachment " + va.Name })...)
	st := r.s.EC2.State()
	for _, v := range st.Volumes {
		left = append(left, "EBS "+v.ID+" ("+v.State+")")
	}
	for _, a := range st.Attachments {
		left = append(left, "attachment "+a.VolumeID+"@"+a.InstanceID+" ("+a.State+")")
	}
	for _, sn := range st.Snapshots {
		left = append(left, "snapshot "+sn.ID)
	}
	snaps, err := r.snaps.leftovers(ctx)
	return append(left, snaps...), err
}
