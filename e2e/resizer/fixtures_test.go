//go:build e2e || bench

package resizer

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// The objects of the tests, built here and nowhere else.

// expandableClass is the StorageClass the claims and volumes name: the API server lets a claim grow only when
// its class allows expansion.
func expandableClass(name, driver string) *storagev1.StorageClass {
	allow := true
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: driver, AllowVolumeExpansion: &allow}
}

// classPV is a retained 1Gi ReadWriteOnce volume of driver's handle in class.
func classPV(name, class, driver, handle string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              class,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: driver, VolumeHandle: handle, FSType: "ext4",
			}},
		},
	}
}

// classClaim is a 1Gi claim in class for the volume pv, for the binder to bind.
func classClaim(ns, name, class, pv string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			VolumeName:       pv,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// fixture is the setting of the tests: a mock driver with MODIFY_VOLUME and its expandable class.
type fixture struct {
	ctx    context.Context
	client kubernetes.Interface
	drv    *csimock.Driver
	driver string
	class  string
}

func newFixture(t *testing.T, ctx context.Context, client kubernetes.Interface, name string) *fixture {
	t.Helper()
	return newDriverFixture(t, ctx, client, name+".csi.stowage.io", name+"-expandable")
}

// newDriverFixture is newFixture for a driver and class named as given.
func newDriverFixture(t *testing.T, ctx context.Context, client kubernetes.Interface, driver, class string) *fixture {
	t.Helper()
	f := &fixture{ctx: ctx, client: client, driver: driver, class: class}
	drv, err := csimock.Start(ctx, csimock.Options{Name: f.driver, ControllerCaps: csimock.ControllerCapsWithModify()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	f.drv = drv
	if _, err := client.StorageV1().StorageClasses().Create(ctx, expandableClass(f.class, f.driver), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return f
}

// boundBlockClaim is boundClaim for a raw block volume and claim.
func (f *fixture) boundBlockClaim(t *testing.T, ns, name string) (csimock.Volume, *corev1.PersistentVolumeClaim) {
	t.Helper()
	block := corev1.PersistentVolumeBlock
	vol := f.drv.AddVolume(name, 1<<30)
	pv := classPV(name, f.class, f.driver, vol.ID)
	pv.Spec.VolumeMode = &block
	if _, err := f.client.CoreV1().PersistentVolumes().Create(f.ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim := classClaim(ns, name, f.class, name)
	claim.Spec.VolumeMode = &block
	if _, err := f.client.CoreV1().PersistentVolumeClaims(ns).Create(f.ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return vol, f.waitClaim(t, ns, name, "bound", func(c *corev1.PersistentVolumeClaim) bool { return c.Status.Phase == corev1.ClaimBound })
}

// boundClaim adds a 1Gi volume to the driver, creates its PersistentVolume and a claim for it in ns, and waits
// until kube-controller-manager bound them. It returns the volume and the bound claim.
func (f *fixture) boundClaim(t *testing.T, ns, name string) (csimock.Volume, *corev1.PersistentVolumeClaim) {
	t.Helper()
	vol := f.drv.AddVolume(name, 1<<30)
	if _, err := f.client.CoreV1().PersistentVolumes().Create(f.ctx, classPV(name, f.class, f.driver, vol.ID), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CoreV1().PersistentVolumeClaims(ns).Create(f.ctx, classClaim(ns, name, f.class, name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return vol, f.waitClaim(t, ns, name, "bound", func(c *corev1.PersistentVolumeClaim) bool { return c.Status.Phase == corev1.ClaimBound })
}

// waitClaim waits until cond holds for the claim and returns it.
func (f *fixture) waitClaim(t *testing.T, ns, name, what string, cond func(*corev1.PersistentVolumeClaim) bool) *corev1.PersistentVolumeClaim {
	t.Helper()
	var pvc *corev1.PersistentVolumeClaim
	e2erig.Eventually(t, f.ctx, waitTimeout, fmt.Sprintf("claim %s/%s %s", ns, name, what), func(ctx context.Context) (bool, error) {
		var err error
		pvc, err = f.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && cond(pvc), err
	})
	return pvc
}

// waitPV waits until cond holds for the volume and returns it.
func (f *fixture) waitPV(t *testing.T, name, what string, cond func(*corev1.PersistentVolume) bool) *corev1.PersistentVolume {
	t.Helper()
	var pv *corev1.PersistentVolume
	e2erig.Eventually(t, f.ctx, waitTimeout, fmt.Sprintf("volume %s %s", name, what), func(ctx context.Context) (bool, error) {
		var err error
		pv, err = f.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && cond(pv), err
	})
	return pv
}

// request patches the claim's storage request, as a user does.
func (f *fixture) request(t *testing.T, ns, name, size string) {
	t.Helper()
	body := fmt.Sprintf(`{"spec":{"resources":{"requests":{"storage":%q}}}}`, size)
	if _, err := f.client.CoreV1().PersistentVolumeClaims(ns).Patch(f.ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		t.Fatalf("claim %s/%s: request %s: %v", ns, name, size, err)
	}
}

// setClass patches the claim's VolumeAttributesClass, as a user does.
func (f *fixture) setClass(t *testing.T, ns, name, class string) {
	t.Helper()
	body := fmt.Sprintf(`{"spec":{"volumeAttributesClassName":%q}}`, class)
	if _, err := f.client.CoreV1().PersistentVolumeClaims(ns).Patch(f.ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		t.Fatalf("claim %s/%s: class %s: %v", ns, name, class, err)
	}
}

// attributesClass creates a VolumeAttributesClass of the driver.
func (f *fixture) attributesClass(t *testing.T, name string, params map[string]string) {
	t.Helper()
	vac := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: name}, DriverName: f.driver, Parameters: params}
	if _, err := f.client.StorageV1().VolumeAttributesClasses().Create(f.ctx, vac, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// finishNodeExpansion does what the kubelet does once it grew the filesystem: the claim's capacity becomes the
// allocated size and the node resize state and condition go (no kubelet runs in this rig).
func (f *fixture) finishNodeExpansion(t *testing.T, ns, name string) {
	t.Helper()
	pvc, err := f.client.CoreV1().PersistentVolumeClaims(ns).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pvc.Status.Capacity[corev1.ResourceStorage] = pvc.Status.AllocatedResources[corev1.ResourceStorage]
	delete(pvc.Status.AllocatedResourceStatuses, corev1.ResourceStorage)
	var conds []corev1.PersistentVolumeClaimCondition
	for _, c := range pvc.Status.Conditions {
		if c.Type != corev1.PersistentVolumeClaimFileSystemResizePending {
			conds = append(conds, c)
		}
	}
	pvc.Status.Conditions = conds
	if _, err := f.client.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(f.ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("claim %s/%s: finishing node expansion: %v", ns, name, err)
	}
}

// waitEvent waits for an Event of reason on the claim from the resizer (source "external-resizer <driver>",
// as upstream's).
func (f *fixture) waitEvent(t *testing.T, ns, claim, reason string) {
	t.Helper()
	e2erig.Eventually(t, f.ctx, waitTimeout, fmt.Sprintf("Event %s on claim %s/%s", reason, ns, claim), func(ctx context.Context) (bool, error) {
		list, err := f.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + claim})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Reason == reason && e.Source.Component == "external-resizer "+f.driver {
				return true, nil
			}
		}
		return false, nil
	})
}

func storage(list corev1.ResourceList) string {
	q := list[corev1.ResourceStorage]
	return q.String()
}
