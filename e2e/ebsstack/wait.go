package ebsstack

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

// waitBound waits for the claim to be Bound and returns its PV and EBS volume.
func (l *Lifecycle) waitBound(ctx context.Context, claim string) (*v1.PersistentVolume, ec2sim.VolumeState, error) {
	kube := l.P.KubeClient()
	var pv *v1.PersistentVolume
	err := poll(ctx, "claim "+claim+" Bound", func(ctx context.Context) (bool, string, error) {
		c, err := kube.CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if c.Status.Phase != v1.ClaimBound {
			return false, string(c.Status.Phase) + l.lastEvent(ctx, claim), nil
		}
		pv, err = kube.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
		return err == nil, "", err
	})
	if err != nil {
		return nil, ec2sim.VolumeState{}, err
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != Driver {
		return nil, ec2sim.VolumeState{}, fmt.Errorf("PV %s is not an %s volume", pv.Name, Driver)
	}
	for _, v := range l.P.EC2().State().Volumes {
		if v.ID == pv.Spec.CSI.VolumeHandle {
			return pv, v, nil
		}
	}
	return nil, ec2sim.VolumeState{}, fmt.Errorf("EBS volume %s of PV %s is not in EC2", pv.Spec.CSI.VolumeHandle, pv.Name)
}

// lastEvent is the newest Event of an object, for error messages.
func (l *Lifecycle) lastEvent(ctx context.Context, name string) string {
	evs, err := l.P.KubeClient().CoreV1().Events(Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil || len(evs.Items) == 0 {
		return ""
	}
	slices.SortFunc(evs.Items, func(a, b v1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
	e := evs.Items[len(evs.Items)-1]
	return "; last event " + e.Reason + ": " + e.Message
}

// waitAttached waits for the volume's VolumeAttachment to node to be attached and for EC2 to show the
// attachment with its loop device.
func (l *Lifecycle) waitAttached(ctx context.Context, node string) (ec2sim.AttachmentState, error) {
	name := AttachmentName(l.volumeID, node)
	instance := l.node(node).InstanceID()
	var att ec2sim.AttachmentState
	err := poll(ctx, "VolumeAttachment "+name+" attached", func(ctx context.Context) (bool, string, error) {
		va, err := l.P.KubeClient().StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "no VolumeAttachment yet", nil
		}
		if err != nil {
			return false, "", err
		}
		if !va.Status.Attached {
			msg := "not attached"
			if va.Status.AttachError != nil {
				msg += ": " + va.Status.AttachError.Message
			}
			return false, msg, nil
		}
		for _, a := range l.attachments(l.volumeID) {
			if a.InstanceID == instance && a.State == "attached" && a.LoopDevice != "" {
				att = a
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("EC2 attachments %v", l.attachments(l.volumeID)), nil
	})
	return att, err
}

func (l *Lifecycle) attachments(volumeID string) []ec2sim.AttachmentState {
	var out []ec2sim.AttachmentState
	for _, a := range l.P.EC2().State().Attachments {
		if a.VolumeID == volumeID {
			out = append(out, a)
		}
	}
	return out
}

func (l *Lifecycle) waitRunning(ctx context.Context, name string) (*v1.Pod, error) {
	var pod *v1.Pod
	err := poll(ctx, "Pod "+name+" Running", func(ctx context.Context) (bool, string, error) {
		var err error
		pod, err = l.P.KubeClient().CoreV1().Pods(Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return pod.Status.Phase == v1.PodRunning, string(pod.Status.Phase) + l.lastEvent(ctx, name), nil
	})
	return pod, err
}

func (l *Lifecycle) waitPodGone(ctx context.Context, name string) error {
	return poll(ctx, "Pod "+name+" gone", func(ctx context.Context) (bool, string, error) {
		_, err := l.P.KubeClient().CoreV1().Pods(Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "still there", err
	})
}
