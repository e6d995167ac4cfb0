//go:build e2e

package resizer

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// TestE2EResizer runs Stowage's csi-resizer with exactly the args and RBAC of aws-ebs-csi-driver's manifest
// against kube-controller-manager and the mock driver, and walks claims through expansion, modification,
// an infeasible class rolled back, and an infeasible size recovered by shrinking the request. At the end every
// write the resizer made is a patch it is granted that the API server accepted (a 409 from a precondition is
// allowed: it wrote nothing and was retried).
func TestE2EResizer(t *testing.T) {
	r := startRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	f := newFixture(t, ctx, r.Client, "resize")
	r.startResizer(t, "csi-resizer", f.drv.Endpoint(), upstreamArgs...)
	const ns = "default"

	t.Run("expand, node handoff, pre-resize annotation removed after the node", func(t *testing.T) {
		vol, _ := f.boundClaim(t, ns, "grow")
		f.request(t, ns, "grow", "2Gi")
		pvc := f.waitClaim(t, ns, "grow", "waiting for node expansion", func(c *corev1.PersistentVolumeClaim) bool {
			return c.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimNodeResizePending
		})
		if got := storage(pvc.Status.AllocatedResources); got != "2Gi" {
			t.Errorf("allocatedResources = %s, want 2Gi", got)
		}
		if !hasCondition(pvc, corev1.PersistentVolumeClaimFileSystemResizePending) {
			t.Errorf("conditions = %+v, want FileSystemResizePending", pvc.Status.Conditions)
		}
		pv := f.waitPV(t, "grow", "at 2Gi", func(pv *corev1.PersistentVolume) bool { return storage(pv.Spec.Capacity) == "2Gi" })
		if got := pv.Annotations["volume.alpha.kubernetes.io/pre-resize-capacity"]; got != "1Gi" {
			t.Errorf("pre-resize-capacity annotation = %q, want 1Gi", got)
		}
		if got := driverVolume(t, f.drv, vol.ID).CapacityBytes; got != 2<<30 {
			t.Errorf("driver's volume size = %d, want 2Gi", got)
		}
		f.waitEvent(t, ns, "grow", "Resizing")
		f.waitEvent(t, ns, "grow", "FileSystemResizeRequired")

		f.finishNodeExpansion(t, ns, "grow")
		f.waitPV(t, "grow", "without the pre-resize annotation", func(pv *corev1.PersistentVolume) bool {
			_, ok := pv.Annotations["volume.alpha.kubernetes.io/pre-resize-capacity"]
			return !ok
		})
		if n := f.drv.CallsFor(csimock.ControllerExpandVolume, vol.ID); n != 1 {
			t.Errorf("ControllerExpandVolume calls = %d, want 1", n)
		}
	})

	t.Run("controller-only expansion (block): finished by the resizer, the kubelet told no node expansion", func(t *testing.T) {
		vol, _ := f.boundBlockClaim(t, ns, "raw")
		f.request(t, ns, "raw", "2Gi")
		pvc := f.waitClaim(t, ns, "raw", "at 2Gi", func(c *corev1.PersistentVolumeClaim) bool { return storage(c.Status.Capacity) == "2Gi" })
		if _, ok := pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage]; ok || len(pvc.Status.Conditions) != 0 {
			t.Errorf("status = %+v, want no resize state and no conditions", pvc.Status)
		}
		if got := pvc.Annotations["volume.kubernetes.io/node-expansion-not-required"]; got != "true" {
			t.Errorf("annotations = %v, want volume.kubernetes.io/node-expansion-not-required=true", pvc.Annotations)
		}
		pv := f.waitPV(t, "raw", "at 2Gi", func(pv *corev1.PersistentVolume) bool { return storage(pv.Spec.Capacity) == "2Gi" })
		if _, ok := pv.Annotations["volume.alpha.kubernetes.io/pre-resize-capacity"]; ok {
			t.Errorf("PV annotations = %v, want no pre-resize capacity", pv.Annotations)
		}
		f.waitEvent(t, ns, "raw", "VolumeResizeSuccessful")
		if got := driverVolume(t, f.drv, vol.ID).CapacityBytes; got != 2<<30 {
			t.Errorf("driver's volume size = %d, want 2Gi", got)
		}
	})

	t.Run("modify: the class's parameters reach the driver, the claim and the volume record it", func(t *testing.T) {
		vol, _ := f.boundClaim(t, ns, "tune")
		f.attributesClass(t, "gold", map[string]string{"iops": "6000"})
		f.setClass(t, ns, "tune", "gold")
		f.waitClaim(t, ns, "tune", "at class gold", func(c *corev1.PersistentVolumeClaim) bool {
			return c.Status.CurrentVolumeAttributesClassName != nil && *c.Status.CurrentVolumeAttributesClassName == "gold" && c.Status.ModifyVolumeStatus == nil
		})
		f.waitPV(t, "tune", "at class gold", func(pv *corev1.PersistentVolume) bool {
			return pv.Spec.VolumeAttributesClassName != nil && *pv.Spec.VolumeAttributesClassName == "gold"
		})
		if got := driverVolume(t, f.drv, vol.ID).Parameters["iops"]; got != "6000" {
			t.Errorf("driver's volume iops = %q, want 6000", got)
		}
		f.waitEvent(t, ns, "tune", "VolumeModifySuccessful")
	})

	t.Run("infeasible class: Infeasible status and a Warning, then rolled back to the current class", func(t *testing.T) {
		vol, _ := f.boundClaim(t, ns, "misfit")
		f.attributesClass(t, "silver", map[string]string{"iops": "3000"})
		f.attributesClass(t, "broken", map[string]string{"tier": csimock.InfeasibleValue})
		f.setClass(t, ns, "misfit", "silver")
		f.waitClaim(t, ns, "misfit", "at class silver", func(c *corev1.PersistentVolumeClaim) bool {
			return c.Status.CurrentVolumeAttributesClassName != nil && *c.Status.CurrentVolumeAttributesClassName == "silver"
		})
		f.setClass(t, ns, "misfit", "broken")
		f.waitClaim(t, ns, "misfit", "Infeasible for class broken", func(c *corev1.PersistentVolumeClaim) bool {
			s := c.Status.ModifyVolumeStatus
			return s != nil && s.Status == corev1.PersistentVolumeClaimModifyVolumeInfeasible && s.TargetVolumeAttributesClassName == "broken"
		})
		f.waitEvent(t, ns, "misfit", "VolumeModifyFailed")

		f.setClass(t, ns, "misfit", "silver")
		pvc := f.waitClaim(t, ns, "misfit", "rolled back", func(c *corev1.PersistentVolumeClaim) bool { return c.Status.ModifyVolumeStatus == nil })
		if got := *pvc.Status.CurrentVolumeAttributesClassName; got != "silver" {
			t.Errorf("currentVolumeAttributesClassName = %q, want silver", got)
		}
		f.waitEvent(t, ns, "misfit", "VolumeModifyCanceled")
		if got := driverVolume(t, f.drv, vol.ID).Parameters; got["iops"] != "3000" || got["tier"] != "" {
			t.Errorf("driver's volume parameters = %v, want silver's", got)
		}
	})

	t.Run("infeasible size recovered by shrinking the request", func(t *testing.T) {
		vol, _ := f.boundClaim(t, ns, "greedy")
		f.request(t, ns, "greedy", "200Gi") // beyond the mock driver's 100Gi
		f.waitClaim(t, ns, "greedy", "ControllerResizeInfeasible", func(c *corev1.PersistentVolumeClaim) bool {
			return c.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimControllerResizeInfeasible
		})
		f.waitEvent(t, ns, "greedy", "VolumeResizeFailed")
		// --retry-interval-max=30m: without the user's change nothing would be tried for half an hour.
		f.request(t, ns, "greedy", "3Gi")
		pvc := f.waitClaim(t, ns, "greedy", "expanded to 3Gi", func(c *corev1.PersistentVolumeClaim) bool {
			return c.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimNodeResizePending
		})
		if got := storage(pvc.Status.AllocatedResources); got != "3Gi" {
			t.Errorf("allocatedResources = %s, want 3Gi", got)
		}
		f.waitPV(t, "greedy", "at 3Gi", func(pv *corev1.PersistentVolume) bool { return storage(pv.Spec.Capacity) == "3Gi" })
		if n := f.drv.CallsFor(csimock.ControllerExpandVolume, vol.ID); n != 2 {
			t.Errorf("ControllerExpandVolume calls = %d, want 2 (the refused one and 3Gi)", n)
		}
	})

	// Leader election on upstream's Lease, external-resizer-<driver with . as ->.
	lease := "external-resizer-" + strings.ReplaceAll(f.driver, ".", "-")
	if l, err := r.Client.CoordinationV1().Leases(sidecarrig.Namespace).Get(ctx, lease, metav1.GetOptions{}); err != nil || l.Spec.HolderIdentity == nil {
		t.Errorf("Lease %s/%s: %v, %+v", sidecarrig.Namespace, lease, err, l)
	}

	// Under exactly upstream's RBAC: every write is a patch of claims' status or of volumes, and none was
	// refused (403) or invalid (422).
	allowed := []string{"persistentvolumeclaims/status", "persistentvolumes"}
	for _, w := range r.resizerWrites(t) {
		if w.Verb != "patch" || !slices.Contains(allowed, w.Resource) || (w.Code >= 300 && w.Code != 409) {
			t.Errorf("unexpected resizer write: %s", w)
		}
	}
	if t.Failed() {
		t.Logf("resizer writes:\n%s", strings.Join(e2erig.Strings(r.resizerWrites(t)), "\n"))
	}
}

// TestE2EResizerInUse runs csi-resizer with upstream's default --handle-volume-inuse-error=true (its Pod cache
// under the same RBAC) against a driver that expands only offline: refused with FailedPrecondition while a Pod
// uses the claim, the expansion is not tried again until the Pod is gone, and then it is at once.
func TestE2EResizerInUse(t *testing.T) {
	r := startRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f := newFixture(t, ctx, r.Client, "offline")
	var online atomic.Bool
	f.drv.SetBeforeCall(func(_ context.Context, method string, _ any) error {
		if method == csimock.ControllerExpandVolume && !online.Load() {
			return status.Error(codes.FailedPrecondition, "volume is in use: this driver expands offline only")
		}
		return nil
	})
	r.startResizer(t, "csi-resizer", f.drv.Endpoint(), "--leader-election=true", "--v=2")
	const ns = "default"
	vol, _ := f.boundClaim(t, ns, "busy")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "user"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/none"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "busy"},
			}}},
		},
	}
	if _, err := r.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.request(t, ns, "busy", "2Gi")
	// The first refusal, then a retry that sees the Pod and does not call the driver.
	e2erig.Eventually(t, ctx, waitTimeout, "a VolumeResizeFailed Event for the Pod in use", func(ctx context.Context) (bool, error) {
		list, err := r.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=busy"})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Reason == "VolumeResizeFailed" && strings.Contains(e.Message, "only supports offline expansion and volume is currently in-use") {
				return true, nil
			}
		}
		return false, nil
	})
	if n := f.drv.CallsFor(csimock.ControllerExpandVolume, vol.ID); n != 1 {
		t.Errorf("ControllerExpandVolume calls while the Pod exists = %d, want 1", n)
	}
	online.Store(true)
	if err := r.Client.CoreV1().Pods(ns).Delete(ctx, "user", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	f.waitClaim(t, ns, "busy", "expanded once the Pod is gone", func(c *corev1.PersistentVolumeClaim) bool {
		return c.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimNodeResizePending
	})
	if n := f.drv.CallsFor(csimock.ControllerExpandVolume, vol.ID); n != 2 {
		t.Errorf("ControllerExpandVolume calls = %d, want 2 (refused, then after the Pod)", n)
	}
}

func hasCondition(pvc *corev1.PersistentVolumeClaim, typ corev1.PersistentVolumeClaimConditionType) bool {
	for _, c := range pvc.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func driverVolume(t *testing.T, drv *csimock.Driver, id string) csimock.Volume {
	t.Helper()
	for _, v := range drv.Volumes() {
		if v.ID == id {
			return v
		}
	}
	t.Fatalf("driver has no volume %s", id)
	return csimock.Volume{}
}
