package ebsstack

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

// The objects of the expand-and-modify scenario.
const (
	expandClass     = "stowage-expand"
	expandClaim     = "grow-0"
	expandPod       = "grow-user"
	fastClass       = "stowage-fast"               // a VolumeAttributesClass EC2 can apply
	impossibleClass = "stowage-gp7"                // one the driver refuses: there is no gp7
	resizerSource   = "external-resizer " + Driver // the Events' source component, as upstream's
	modifyAction    = "ModifyVolume"               // the EC2 action counted
	gib             = float64(1 << 30)             // for the printed sizes
)

// ExpandModify is the expand-and-modify scenario and needs the stack started with csi-resizer (Options.With):
// a Pod's claim grows and the filesystem in the published path follows (EC2 ModifyVolume, then the kubelet's
// NodeExpandVolume); a size change and a VolumeAttributesClass change made together become one EC2
// ModifyVolume (ebs-plugin's coalescing window); a class the driver refuses turns Infeasible with a Warning
// Event, and setting the class back rolls the claim back. Everything it made is deleted again.
func (l *Lifecycle) ExpandModify(ctx context.Context) error {
	l.R.Scenario("8. Expand and modify a volume in use")
	if err := l.P.CheckResizer(ctx); err != nil {
		return err
	}
	e := &expansion{l: l}
	return l.steps(ctx,
		step{"PVC grow-0 in use by Pod grow-user on node A", e.start},
		step{"PVC grows to 2Gi, the filesystem follows", e.grow},
		step{"size and class changed together: one EC2 ModifyVolume", e.growAndModify},
		step{"infeasible class: Infeasible, Event, rolled back", e.infeasibleAndRollback},
		step{"Pod and PVC deleted", e.deleteAll})
}

// expansion is the scenario's state.
type expansion struct {
	l        *Lifecycle
	pv       *v1.PersistentVolume
	volumeID string
	podUID   string
}

func (e *expansion) start(ctx context.Context) (string, error) {
	l := e.l
	// xfs: growing a mounted ext4 needs CAP_SYS_RESOURCE, which containers (this rig's included) often lack;
	// xfs_growfs needs CAP_SYS_ADMIN, which mounting needs anyway.
	pv, vol, pod, err := l.createAndStart(ctx, filesystemClass(expandClass, "xfs"),
		Claim(expandClaim, expandClass, "1Gi", l.NodeA, false), Pod(expandPod, l.NodeA, expandClaim, false), nil)
	if err != nil {
		return "", err
	}
	e.pv, e.volumeID, e.podUID = pv, vol.ID, string(pod.UID)
	size, err := e.fsSize()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("EBS %s (%d GiB, %s) mounted, xfs %.2f GiB", vol.ID, vol.SizeGiB, vol.Type, size/gib), nil
}

// grow asks for 2Gi and waits until the kubelet recorded the new capacity, then checks EC2 and the filesystem.
func (e *expansion) grow(ctx context.Context) (string, error) {
	before := e.l.P.EC2().Requests(modifyAction, "OK")
	if err := e.patchClaim(ctx, `{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`); err != nil {
		return "", err
	}
	if err := e.waitCapacity(ctx, "2Gi", ""); err != nil {
		return "", err
	}
	vol, err := e.ec2Volume()
	if err != nil {
		return "", err
	}
	size, err := e.fsSize()
	if err != nil {
		return "", err
	}
	calls := e.l.P.EC2().Requests(modifyAction, "OK") - before
	if vol.SizeGiB != 2 || size < 1.5*gib || calls != 1 {
		return "", fmt.Errorf("after growing to 2Gi: EBS %s is %d GiB after %d ModifyVolume calls, filesystem %.2f GiB", vol.ID, vol.SizeGiB, calls, size/gib)
	}
	return fmt.Sprintf("1 ModifyVolume, EBS %s now %d GiB, NodeExpandVolume grew the filesystem to %.2f GiB", vol.ID, vol.SizeGiB, size/gib), nil
}

// growAndModify asks for 10Gi and the class stowage-fast in one write: the resizer's expand and modify workers
// call the driver at once, and ebs-plugin merges both into one ModifyVolume. (4000 IOPS needs the 10 GiB: gp3
// allows at most 500 IOPS per GiB.)
func (e *expansion) growAndModify(ctx context.Context) (string, error) {
	kube := e.l.P.KubeClient()
	fast := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: fastClass}, DriverName: Driver,
		Parameters: map[string]string{"type": "gp3", "iops": "4000", "throughput": "250"}}
	if _, err := kube.StorageV1().VolumeAttributesClasses().Create(ctx, fast, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	before := e.l.P.EC2().Requests(modifyAction, "OK")
	if err := e.patchClaim(ctx, `{"spec":{"resources":{"requests":{"storage":"10Gi"}},"volumeAttributesClassName":"`+fastClass+`"}}`); err != nil {
		return "", err
	}
	if err := e.waitCapacity(ctx, "10Gi", fastClass); err != nil {
		return "", err
	}
	vol, err := e.ec2Volume()
	if err != nil {
		return "", err
	}
	size, err := e.fsSize()
	if err != nil {
		return "", err
	}
	calls := e.l.P.EC2().Requests(modifyAction, "OK") - before
	if vol.SizeGiB != 10 || vol.Iops != 4000 || vol.Throughput != 250 || size < 9*gib || calls != 1 {
		return "", fmt.Errorf("after 10Gi + %s: EBS %s is %d GiB, %d IOPS, %d MiB/s after %d ModifyVolume calls, filesystem %.2f GiB",
			fastClass, vol.ID, vol.SizeGiB, vol.Iops, vol.Throughput, calls, size/gib)
	}
	pv, err := kube.CoreV1().PersistentVolumes().Get(ctx, e.pv.Name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if c := pv.Spec.VolumeAttributesClassName; c == nil || *c != fastClass {
		return "", fmt.Errorf("PV %s volumeAttributesClassName = %v, want %s", pv.Name, c, fastClass)
	}
	return fmt.Sprintf("1 ModifyVolume for both: EBS %s now %d GiB gp3 %d IOPS %d MiB/s, filesystem %.2f GiB", vol.ID, vol.SizeGiB, vol.Iops, vol.Throughput, size/gib), nil
}

// infeasibleAndRollback asks for a class with a volume type EBS does not have: the driver refuses it, the claim
// says Infeasible with a Warning Event, EC2 is not asked, and setting stowage-fast back clears the status.
func (e *expansion) infeasibleAndRollback(ctx context.Context) (string, error) {
	kube := e.l.P.KubeClient()
	bad := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: impossibleClass}, DriverName: Driver,
		Parameters: map[string]string{"type": "gp7"}}
	if _, err := kube.StorageV1().VolumeAttributesClasses().Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	before := e.l.P.EC2().Requests(modifyAction, "OK")
	if err := e.patchClaim(ctx, `{"spec":{"volumeAttributesClassName":"`+impossibleClass+`"}}`); err != nil {
		return "", err
	}
	err := e.waitClaim(ctx, "Infeasible for "+impossibleClass, func(c *v1.PersistentVolumeClaim) bool {
		s := c.Status.ModifyVolumeStatus
		return s != nil && s.Status == v1.PersistentVolumeClaimModifyVolumeInfeasible && s.TargetVolumeAttributesClassName == impossibleClass
	})
	if err != nil {
		return "", err
	}
	msg, err := e.waitEvent(ctx, "VolumeModifyFailed")
	if err != nil {
		return "", err
	}
	if err := e.patchClaim(ctx, `{"spec":{"volumeAttributesClassName":"`+fastClass+`"}}`); err != nil {
		return "", err
	}
	err = e.waitClaim(ctx, "rolled back to "+fastClass, func(c *v1.PersistentVolumeClaim) bool {
		return c.Status.ModifyVolumeStatus == nil && c.Status.CurrentVolumeAttributesClassName != nil && *c.Status.CurrentVolumeAttributesClassName == fastClass
	})
	if err != nil {
		return "", err
	}
	if _, err := e.waitEvent(ctx, "VolumeModifyCanceled"); err != nil {
		return "", err
	}
	if calls := e.l.P.EC2().Requests(modifyAction, "OK") - before; calls != 0 {
		return "", fmt.Errorf("%d ModifyVolume calls for an infeasible class, want 0", calls)
	}
	return "Infeasible, Warning VolumeModifyFailed (" + trimMessage(msg) + "); set back to " + fastClass + ": status cleared, EC2 untouched", nil
}

// deleteAll deletes the Pod and the claim and waits until the EBS volume is gone.
func (e *expansion) deleteAll(ctx context.Context) (string, error) {
	kube := e.l.P.KubeClient()
	if err := kube.CoreV1().Pods(Namespace).Delete(ctx, expandPod, metav1.DeleteOptions{}); err != nil {
		return "", err
	}
	if err := e.l.waitPodGone(ctx, expandPod); err != nil {
		return "", err
	}
	if err := kube.CoreV1().PersistentVolumeClaims(Namespace).Delete(ctx, expandClaim, metav1.DeleteOptions{}); err != nil {
		return "", err
	}
	err := poll(ctx, "EBS volume "+e.volumeID+" deleted", func(context.Context) (bool, string, error) {
		for _, v := range e.l.P.EC2().State().Volumes {
			if v.ID == e.volumeID {
				return false, v.State, nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		return "", err
	}
	for _, c := range []string{fastClass, impossibleClass} {
		if err := kube.StorageV1().VolumeAttributesClasses().Delete(ctx, c, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return "", err
		}
	}
	return "Pod, PVC, PV and EBS " + e.volumeID + " gone", nil
}

func (e *expansion) patchClaim(ctx context.Context, body string) error {
	_, err := e.l.P.KubeClient().CoreV1().PersistentVolumeClaims(Namespace).Patch(ctx, expandClaim, types.MergePatchType, []byte(body), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("claim %s: patch %s: %w", expandClaim, body, err)
	}
	return nil
}

// waitCapacity waits until the claim's status.capacity is size with no resize in progress and, if class is
// set, the class applied.
func (e *expansion) waitCapacity(ctx context.Context, size, class string) error {
	return e.waitClaim(ctx, "capacity "+size, func(c *v1.PersistentVolumeClaim) bool {
		q := c.Status.Capacity[v1.ResourceStorage]
		_, resizing := c.Status.AllocatedResourceStatuses[v1.ResourceStorage]
		done := q.String() == size && !resizing
		if class != "" {
			done = done && c.Status.CurrentVolumeAttributesClassName != nil && *c.Status.CurrentVolumeAttributesClassName == class
		}
		return done
	})
}

func (e *expansion) waitClaim(ctx context.Context, what string, cond func(*v1.PersistentVolumeClaim) bool) error {
	return poll(ctx, "claim "+expandClaim+" "+what, func(ctx context.Context) (bool, string, error) {
		c, err := e.l.P.KubeClient().CoreV1().PersistentVolumeClaims(Namespace).Get(ctx, expandClaim, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		state := fmt.Sprintf("capacity %s, allocated %v, class %v, modify %+v%s", storageOf(c.Status.Capacity), c.Status.AllocatedResourceStatuses,
			c.Status.CurrentVolumeAttributesClassName, c.Status.ModifyVolumeStatus, e.l.lastEvent(ctx, expandClaim))
		return cond(c), state, nil
	})
}

// waitEvent waits for an Event of reason from csi-resizer on the claim and returns its message.
func (e *expansion) waitEvent(ctx context.Context, reason string) (string, error) {
	msg := ""
	err := poll(ctx, "Event "+reason+" on claim "+expandClaim, func(ctx context.Context) (bool, string, error) {
		evs, err := e.l.P.KubeClient().CoreV1().Events(Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + expandClaim})
		if err != nil {
			return false, "", err
		}
		var seen []string
		for _, ev := range evs.Items {
			if ev.Reason == reason && ev.Source.Component == resizerSource {
				msg = ev.Message
				return true, "", nil
			}
			seen = append(seen, ev.Reason)
		}
		slices.Sort(seen)
		return false, "events " + strings.Join(slices.Compact(seen), ", "), nil
	})
	return msg, err
}

func (e *expansion) ec2Volume() (ec2sim.VolumeState, error) {
	for _, v := range e.l.P.EC2().State().Volumes {
		if v.ID == e.volumeID {
			return v, nil
		}
	}
	return ec2sim.VolumeState{}, fmt.Errorf("EBS volume %s is not in EC2", e.volumeID)
}

// fsSize is the size of the filesystem mounted in the Pod's published path, as df reports it.
func (e *expansion) fsSize() (float64, error) {
	path := e.l.node(e.l.NodeA).PublishPath(e.podUID, e.pv.Name)
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return float64(st.Blocks) * float64(st.Bsize), nil
}

func storageOf(list v1.ResourceList) string {
	q := list[v1.ResourceStorage]
	return q.String()
}
