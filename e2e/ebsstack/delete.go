package ebsstack

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// Delete is scenario 5: Pods and claims deleted; PVs and EBS volumes gone, nothing left in the emulator,
// no loop device and no mount left.
func (l *Lifecycle) Delete(ctx context.Context) error {
	l.R.Scenario("5. Delete: nothing left behind")
	return l.steps(ctx, step{"Pods deleted", l.deletePods}, step{"PVCs deleted, PVs gone", l.deleteClaims},
		step{"nothing left in EC2, no loop device or mount", l.checkNothingLeft})
}

// deletePods deletes every Pod of the namespace and waits until each is gone (unpublished and unstaged).
func (l *Lifecycle) deletePods(ctx context.Context) (string, error) {
	pods := l.P.KubeClient().CoreV1().Pods(Namespace)
	names, err := deleteAll(ctx, func(ctx context.Context) ([]string, error) {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return objectNames(list.Items, func(p v1.Pod) string { return p.Name }), nil
	}, func(ctx context.Context, name string) error { return pods.Delete(ctx, name, metav1.DeleteOptions{}) })
	if err != nil {
		return "", err
	}
	for _, n := range names {
		if err := l.waitPodGone(ctx, n); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("Pods %s deleted: volumes unpublished and unstaged", strings.Join(names, ", ")), nil
}

// deleteClaims deletes every claim of the namespace and waits until no PV is left.
func (l *Lifecycle) deleteClaims(ctx context.Context) (string, error) {
	kube := l.P.KubeClient()
	claims := kube.CoreV1().PersistentVolumeClaims(Namespace)
	names, err := deleteAll(ctx, func(ctx context.Context) ([]string, error) {
		list, err := claims.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return objectNames(list.Items, func(c v1.PersistentVolumeClaim) string { return c.Name }), nil
	}, func(ctx context.Context, name string) error { return claims.Delete(ctx, name, metav1.DeleteOptions{}) })
	if err != nil {
		return "", err
	}
	err = poll(ctx, "PersistentVolumes gone", func(ctx context.Context) (bool, string, error) {
		pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		left := objectNames(pvs.Items, func(pv v1.PersistentVolume) string { return pv.Name + "(" + string(pv.Status.Phase) + ")" })
		return len(left) == 0, strings.Join(left, " "), nil
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("PVCs %s deleted; their PVs are gone", strings.Join(names, ", ")), nil
}

// checkNothingLeft waits until the emulator's /debug/state holds nothing, then checks that no loop device,
// mount or VolumeAttachment is left.
func (l *Lifecycle) checkNothingLeft(ctx context.Context) (string, error) {
	err := poll(ctx, "EC2 emptied", func(ctx context.Context) (bool, string, error) {
		st, err := l.debugState(ctx)
		if err != nil {
			return false, "", err
		}
		return len(st.Volumes)+len(st.Attachments)+len(st.Snapshots) == 0,
			fmt.Sprintf("%d volumes, %d attachments, %d snapshots", len(st.Volumes), len(st.Attachments), len(st.Snapshots)), nil
	})
	if err != nil {
		return "", err
	}
	if loops := LoopDevicesUnder(l.P.VolumeDir()); len(loops) > 0 {
		return "", fmt.Errorf("loop devices left: %v", loops)
	}
	for _, name := range l.P.NodeNames() {
		if mounts, err := l.node(name).CSIMountsLeft(); err != nil || len(mounts) > 0 {
			return "", fmt.Errorf("mounts left on %s: %v (%v)", name, mounts, err)
		}
	}
	vas, err := l.P.KubeClient().StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil || len(vas.Items) > 0 {
		return "", fmt.Errorf("VolumeAttachments left: %d (%v)", len(vas.Items), err)
	}
	return "GET /debug/state: EC2 holds no volume, attachment or snapshot; no loop device, mount or VolumeAttachment left", nil
}

// BadParameter is scenario 6: a StorageClass with an invalid parameter gets a ProvisioningFailed Event
// naming it, and nothing is created in EC2.
func (l *Lifecycle) BadParameter(ctx context.Context) error {
	l.R.Scenario("6. Bad StorageClass parameter")
	return l.steps(ctx, step{"ProvisioningFailed names the parameter", l.badParameter})
}

func (l *Lifecycle) badParameter(ctx context.Context) (string, error) {
	kube := l.P.KubeClient()
	claim, err := l.create(ctx, StorageClass("stowage-bad", map[string]string{"type": "gp9"}),
		Claim("bad-0", "stowage-bad", "1Gi", l.NodeA, false), nil)
	if err != nil {
		return "", err
	}
	message, err := l.waitProvisioningFailed(ctx, "bad-0", `"type"`, "gp9")
	if err != nil {
		return "", err
	}
	for _, v := range l.P.EC2().State().Volumes {
		if v.Tags["CSIVolumeName"] == "pvc-"+string(claim.UID) {
			return "", fmt.Errorf("volume %s was created for the bad claim", v.ID)
		}
	}
	c, err := kube.CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, "bad-0", metav1.GetOptions{})
	if err != nil || c.Status.Phase != v1.ClaimPending {
		return "", fmt.Errorf("claim bad-0 is %v (%v), want Pending", c.Status.Phase, err)
	}
	if err := kube.CoreV1().PersistentVolumeClaims(Namespace).Delete(ctx, "bad-0", metav1.DeleteOptions{}); err != nil {
		return "", err
	}
	if err := kube.StorageV1().StorageClasses().Delete(ctx, "stowage-bad", metav1.DeleteOptions{}); err != nil {
		return "", err
	}
	return fmt.Sprintf("ProvisioningFailed: %s; no EBS volume created", trimMessage(message)), nil
}

// waitProvisioningFailed waits for a ProvisioningFailed Event on claim whose message holds every one of
// words, and returns the message.
func (l *Lifecycle) waitProvisioningFailed(ctx context.Context, claim string, words ...string) (string, error) {
	var message string
	err := poll(ctx, "ProvisioningFailed Event on "+claim, func(ctx context.Context) (bool, string, error) {
		evs, err := l.P.KubeClient().CoreV1().Events(Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": claim, "reason": "ProvisioningFailed"}.String()})
		if err != nil {
			return false, "", err
		}
		for _, e := range evs.Items {
			if containsAll(e.Message, words) {
				message = e.Message
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d ProvisioningFailed events", len(evs.Items)), nil
	})
	return message, err
}

func containsAll(s string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}
