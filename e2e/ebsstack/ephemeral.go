package ebsstack

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	ephemeralPod     = "ephemeral-app"
	ephemeralLatePod = "ephemeral-late"
	// provisionIntentLease is the Lease in which Stowage's provisioner records, before CreateVolume, that a
	// claim's volume may exist: the driver's lock name plus "-intents", in the leader election namespace.
	provisionIntentLease = "ebs-csi-aws-com-intents"
	// provisionIntentPrefix, followed by the claim's UID, is the annotation of one claim's entry in that Lease.
	provisionIntentPrefix = "intent.provisioner.stowage-csi.io/"
	// createLatency keeps CreateVolume in flight long enough for a Pod to be deleted meanwhile.
	createLatency = 3 * time.Second
)

// ephemeralVolume is one generic ephemeral volume of a Pod: where it is mounted, its class and filesystem.
type ephemeralVolume struct {
	name, mountPath, class, volumeType, fsType string
}

// ephemeralVolumes are the two volumes of the scenario's Pod: two classes, two EBS types, two filesystems.
var ephemeralVolumes = []ephemeralVolume{
	{name: "data", mountPath: "/data", class: "stowage-ephemeral-gp3", volumeType: "gp3", fsType: "ext4"},
	{name: "scratch", mountPath: "/scratch", class: "stowage-ephemeral-gp2", volumeType: "gp2", fsType: "xfs"},
}

// EphemeralVolumes is scenario 7 and stands alone: a Pod left to kube-scheduler with two generic ephemeral
// volumes of different WaitForFirstConsumer classes. kube-controller-manager's ephemeral-volume controller
// creates a claim per volume, owned by the Pod; the scheduler places the Pod and selects its node for the
// claims; the provisioner creates each volume in that node's zone; the kubelet mounts and the Pod writes.
// Deleting the Pod makes the garbage collector delete the claims, so the volumes are detached and deleted
// with nothing left in EC2. Then a Pod is deleted while CreateVolume for its claim is still in flight: the
// volume created for the already deleted claim is deleted too.
func (l *Lifecycle) EphemeralVolumes(ctx context.Context) error {
	l.R.Scenario("7. Generic ephemeral volumes follow their Pod")
	e := &ephemeral{l: l, zone: l.zone(l.NodeC)}
	return l.steps(ctx,
		step{"Pod with two ephemeral volumes, placed by kube-scheduler", e.create},
		step{"claims created for the Pod, owned by it, on its node", e.claimsOwned},
		step{"volumes provisioned in the Pod's zone, mounted and written", e.mountedAndWritten},
		step{"Pod deleted: claims, volumes and EBS volumes gone", e.deletePod},
		step{"Pod deleted while its claim's CreateVolume runs: nothing leaks", e.deleteWhileProvisioning},
	)
}

type ephemeral struct {
	l    *Lifecycle
	zone string
	pod  *v1.Pod
	// volumeIDs are the EBS volumes of the first Pod's claims, by volume name.
	volumeIDs map[string]string
}

// ephemeralClaimName is the claim the ephemeral-volume controller creates for a Pod's volume.
func ephemeralClaimName(pod, volume string) string { return pod + "-" + volume }

// ephemeralPodSpec is a Pod without a node: kube-scheduler places it on node (by hostname label), and each
// volume is a claim template of its class.
func ephemeralPodSpec(name, node string, vols []ephemeralVolume) *v1.Pod {
	c := v1.Container{Name: "app", Image: pauseImage}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
		Spec: v1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": node},
		},
	}
	for _, vol := range vols {
		class := vol.class
		c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: vol.name, MountPath: vol.mountPath})
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: vol.name, VolumeSource: v1.VolumeSource{
			Ephemeral: &v1.EphemeralVolumeSource{VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: v1.PersistentVolumeClaimSpec{
					StorageClassName: &class,
					AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
					Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		}})
	}
	pod.Spec.Containers = []v1.Container{c}
	return pod
}

func (e *ephemeral) create(ctx context.Context) (string, error) {
	kube := e.l.P.KubeClient()
	for _, vol := range ephemeralVolumes {
		class := StorageClass(vol.class, map[string]string{"type": vol.volumeType, "csi.storage.k8s.io/fstype": vol.fsType})
		if _, err := kube.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
	}
	pod, err := kube.CoreV1().Pods(Namespace).Create(ctx, ephemeralPodSpec(ephemeralPod, e.l.NodeC, ephemeralVolumes), metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	e.pod = pod
	return fmt.Sprintf("Pod %s with volumes data (gp3, ext4) and scratch (gp2, xfs), no node set", ephemeralPod), nil
}

// claimsOwned waits until kube-scheduler has bound the Pod to node C and each claim exists, is controlled by
// the Pod, and carries the scheduler's node choice.
func (e *ephemeral) claimsOwned(ctx context.Context) (string, error) {
	kube := e.l.P.KubeClient()
	err := poll(ctx, "Pod "+ephemeralPod+" scheduled", func(ctx context.Context) (bool, string, error) {
		p, err := kube.CoreV1().Pods(Namespace).Get(ctx, ephemeralPod, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		e.pod = p
		return p.Spec.NodeName != "", "unscheduled" + e.l.lastEvent(ctx, ephemeralPod), nil
	})
	if err != nil {
		return "", err
	}
	if e.pod.Spec.NodeName != e.l.NodeC {
		return "", fmt.Errorf("kube-scheduler put Pod %s on %s, its node selector asks for %s", ephemeralPod, e.pod.Spec.NodeName, e.l.NodeC)
	}
	for _, vol := range ephemeralVolumes {
		name := ephemeralClaimName(ephemeralPod, vol.name)
		err := poll(ctx, "claim "+name+" with the selected node", func(ctx context.Context) (bool, string, error) {
			c, err := kube.CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, "not created yet", nil
			}
			if err != nil {
				return false, "", err
			}
			if !metav1.IsControlledBy(c, e.pod) {
				return false, "", fmt.Errorf("claim %s is not controlled by Pod %s (UID %s): owners %v", name, ephemeralPod, e.pod.UID, c.OwnerReferences)
			}
			got := c.Annotations[selectedNodeKey]
			return got == e.l.NodeC, fmt.Sprintf("selected node %q", got), nil
		})
		if err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("scheduled to %s; claims %s and %s controlled by the Pod, selected node %s", e.l.NodeC,
		ephemeralClaimName(ephemeralPod, "data"), ephemeralClaimName(ephemeralPod, "scratch"), e.l.NodeC), nil
}

// mountedAndWritten waits for both claims to be bound to volumes of the right type in node C's zone and for
// the Pod to run, then writes and reads a file through each published volume, on its filesystem.
func (e *ephemeral) mountedAndWritten(ctx context.Context) (string, error) {
	e.volumeIDs = map[string]string{}
	pvs := map[string]*v1.PersistentVolume{}
	for _, vol := range ephemeralVolumes {
		pv, state, err := e.l.waitBound(ctx, ephemeralClaimName(ephemeralPod, vol.name))
		if err != nil {
			return "", err
		}
		if state.Zone != e.zone || state.Type != vol.volumeType {
			return "", fmt.Errorf("volume %s of claim %s is %s in %s, want %s in %s", state.ID,
				ephemeralClaimName(ephemeralPod, vol.name), state.Type, state.Zone, vol.volumeType, e.zone)
		}
		e.volumeIDs[vol.name] = state.ID
		pvs[vol.name] = pv
	}
	pod, err := e.l.waitRunning(ctx, ephemeralPod)
	if err != nil {
		return "", err
	}
	kubelet := e.l.node(e.l.NodeC)
	for _, vol := range ephemeralVolumes {
		dir := kubelet.PublishPath(string(pod.UID), pvs[vol.name].Name)
		if err := checkFSType(kubelet, "published "+vol.name+" volume", dir, vol.fsType); err != nil {
			return "", err
		}
		want := []byte("written to the " + vol.name + " ephemeral volume\n")
		path := filepath.Join(dir, "hello.txt")
		if err := writeSynced(path, want); err != nil {
			return "", err
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
			return "", fmt.Errorf("read back %q from %s, %v", got, path, err)
		}
	}
	return fmt.Sprintf("data %s (gp3, ext4) and scratch %s (gp2, xfs) in %s, mounted, written and read back",
		e.volumeIDs["data"], e.volumeIDs["scratch"], e.zone), nil
}

// deletePod deletes the Pod and waits until its claims, their PVs and the EBS volumes are gone, with no
// attachment left in EC2.
func (e *ephemeral) deletePod(ctx context.Context) (string, error) {
	kube := e.l.P.KubeClient()
	if err := kube.CoreV1().Pods(Namespace).Delete(ctx, ephemeralPod, metav1.DeleteOptions{}); err != nil {
		return "", err
	}
	if err := e.l.waitPodGone(ctx, ephemeralPod); err != nil {
		return "", err
	}
	for _, vol := range ephemeralVolumes {
		if err := e.waitClaimGone(ctx, ephemeralClaimName(ephemeralPod, vol.name)); err != nil {
			return "", err
		}
	}
	ids := []string{e.volumeIDs["data"], e.volumeIDs["scratch"]}
	// The provisioner deletes the EBS volume first and the PV after it: wait for both.
	err := poll(ctx, "PVs and EBS volumes "+strings.Join(ids, ", ")+" deleted and detached", func(ctx context.Context) (bool, string, error) {
		var left []string
		pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		for _, pv := range pvs.Items {
			if pv.Spec.CSI != nil && slices.Contains(ids, pv.Spec.CSI.VolumeHandle) {
				left = append(left, "PV "+pv.Name+" "+string(pv.Status.Phase))
			}
		}
		st := e.l.P.EC2().State()
		for _, v := range st.Volumes {
			if slices.Contains(ids, v.ID) {
				left = append(left, v.ID+" "+v.State)
			}
		}
		for _, a := range st.Attachments {
			if slices.Contains(ids, a.VolumeID) {
				left = append(left, a.VolumeID+" attached to "+a.InstanceID)
			}
		}
		return len(left) == 0, strings.Join(left, ", "), nil
	})
	if err != nil {
		return "", err
	}
	return "the garbage collector deleted both claims; PVs, attachments and EBS volumes are gone", nil
}

// waitClaimGone waits until the claim no longer exists.
func (e *ephemeral) waitClaimGone(ctx context.Context, name string) error {
	return poll(ctx, "claim "+name+" deleted", func(ctx context.Context) (bool, string, error) {
		c, err := e.l.P.KubeClient().CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, fmt.Sprintf("%s, finalizers %v", c.Status.Phase, c.Finalizers), nil
	})
}

// deleteWhileProvisioning makes EC2's CreateVolume slow, creates a Pod with one ephemeral volume, and deletes
// the Pod as soon as the provisioner has recorded its intent to create the claim's volume (so CreateVolume is
// in flight). The claim goes with the Pod; the volume EC2 then creates for it must be deleted, not leaked.
func (e *ephemeral) deleteWhileProvisioning(ctx context.Context) (string, error) {
	kube := e.l.P.KubeClient()
	ec2 := e.l.P.EC2()
	before := ec2.Faults()
	slow := before
	slow.Actions, slow.Latency = []string{"CreateVolume"}, createLatency
	ec2.SetFaults(slow)
	defer ec2.SetFaults(before)

	creates := ec2.Requests("CreateVolume", "OK")
	vols := ephemeralVolumes[:1]
	if _, err := kube.CoreV1().Pods(Namespace).Create(ctx, ephemeralPodSpec(ephemeralLatePod, e.l.NodeC, vols), metav1.CreateOptions{}); err != nil {
		return "", err
	}
	claimName := ephemeralClaimName(ephemeralLatePod, vols[0].name)
	var claim *v1.PersistentVolumeClaim
	err := poll(ctx, "the provisioner's intent for claim "+claimName, func(ctx context.Context) (bool, string, error) {
		c, err := kube.CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, claimName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "not created yet", nil
		}
		if err != nil {
			return false, "", err
		}
		claim = c
		lease, err := kube.CoordinationV1().Leases(rbacNamespace).Get(ctx, provisionIntentLease, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "no intent record Lease yet", nil
		}
		if err != nil {
			return false, "", err
		}
		_, ok := lease.Annotations[provisionIntentPrefix+string(c.UID)]
		return ok, fmt.Sprintf("claim %s, volume %q, %d entries in the record", c.Status.Phase, c.Spec.VolumeName, len(lease.Annotations)), nil
	})
	if err != nil {
		return "", err
	}
	if err := kube.CoreV1().Pods(Namespace).Delete(ctx, ephemeralLatePod, metav1.DeleteOptions{}); err != nil {
		return "", err
	}
	if err := e.l.waitPodGone(ctx, ephemeralLatePod); err != nil {
		return "", err
	}
	if err := e.waitClaimGone(ctx, claimName); err != nil {
		return "", err
	}
	// CreateVolume was in flight when the claim went; once EC2 has answered it, the volume it made (named
	// after the claim's UID, pvc-<uid>, and tagged so) must be deleted again.
	pvName := "pvc-" + string(claim.UID)
	err = poll(ctx, "EC2 volume of "+pvName+" deleted after CreateVolume answered", func(context.Context) (bool, string, error) {
		if ec2.Requests("CreateVolume", "OK") == creates {
			return false, "CreateVolume not answered yet", nil
		}
		for _, v := range ec2.State().Volumes {
			if v.Tags["CSIVolumeName"] == pvName {
				return false, v.ID + " " + v.State, nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("claim %s deleted with its Pod during a %s CreateVolume; the volume EC2 made for it is deleted",
		claimName, createLatency), nil
}
