//go:build e2e

package conformance

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/ebsinstall"
	"github.com/stowage-csi/stowage/e2e/images"
	"github.com/stowage-csi/stowage/e2e/rig"
)

// growthName names the class, claim and Pod of the growth check.
const growthName = "conformance-growth"

// checkFilesystemGrows is what the suite's volume-expand specs leave out: they wait for the claim's
// status.capacity, which the kubelet sets from NodeExpandVolume's answer, and never look at the filesystem. A
// node plugin that answers success without growing it passes them. Here a Pod watches its own mount with df
// while the claim grows from 1Gi to 2Gi in use, and the check passes only when the filesystem the Pod sees has
// grown by most of the added GiB (xfs, which grows on-line on this machine; ext4's on-line growth needs a
// capability it withholds).
func checkFilesystemGrows(t *testing.T, ctx context.Context, client kubernetes.Interface) {
	t.Helper()
	const ns = "default"
	sc := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: growthName},
		Provisioner:          ebsinstall.Driver,
		Parameters:           map[string]string{"type": "gp3", "csi.storage.k8s.io/fstype": "xfs"},
		AllowVolumeExpansion: ptr(true),
		VolumeBindingMode:    ptr(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if _, err := client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: growthName, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr(growthName),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One line a second: the filesystem's size in KiB as the Pod sees it.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: growthName, Namespace: ns},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "df", Image: images.BusyboxImage,
				Command:      []string{"sh", "-c", "while true; do df -Pk /data | tail -n 1; sleep 1; done"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: growthName}}}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeGrowthObjects(t, client, ns) })

	var before int64
	rig.Eventually(t, ctx, 4*time.Minute, "the Pod to report its filesystem's size", func(ctx context.Context) (bool, error) {
		kib, err := podFilesystemKiB(ctx, client, ns)
		before = kib
		return err == nil && kib > 0, nil
	})
	patch := []byte(`{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`)
	if _, err := client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, growthName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	two := resource.MustParse("2Gi")
	rig.Eventually(t, ctx, 4*time.Minute, "the claim's status to say 2Gi", func(ctx context.Context) (bool, error) {
		c, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, growthName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got := c.Status.Capacity[corev1.ResourceStorage]
		return got.Cmp(two) >= 0, nil
	})
	// The claim says 2Gi now; the filesystem must show it within a few of the Pod's df lines. 900 MiB of the
	// added 1 GiB leaves room for xfs's own log and metadata.
	want := before + 900*1024
	var after int64
	_ = wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if kib, err := podFilesystemKiB(ctx, client, ns); err == nil {
			after = kib
		}
		return after >= want, nil
	})
	if after < want {
		t.Errorf("the claim's status says 2Gi, but the filesystem its Pod sees went from %d KiB to %d KiB, not to at least %d: NodeExpandVolume answered without growing it", before, after, want)
	}
	t.Logf("on-line growth: the filesystem in the Pod went from %d KiB to %d KiB", before, after)
}

// podFilesystemKiB reads the size df printed last in the growth Pod's log.
func podFilesystemKiB(ctx context.Context, client kubernetes.Interface, ns string) (int64, error) {
	tail := int64(1)
	logs, err := client.CoreV1().Pods(ns).GetLogs(growthName, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	// df -P: Filesystem 1024-blocks Used Available Capacity Mounted-on.
	fields := strings.Fields(string(logs))
	if len(fields) < 6 || fields[5] != "/data" {
		return 0, fmt.Errorf("df printed %q", logs)
	}
	return strconv.ParseInt(fields[1], 10, 64)
}

// removeGrowthObjects deletes the Pod, then the claim and the class, waiting for the Pod so that the volume
// is unpublished before the chart goes.
func removeGrowthObjects(t *testing.T, client kubernetes.Interface, ns string) {
	ctx := context.Background()
	zero := int64(0)
	if err := client.CoreV1().Pods(ns).Delete(ctx, growthName, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
	rig.Eventually(t, ctx, 2*time.Minute, "the growth Pod to go", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Pods(ns).Get(ctx, growthName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err := client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, growthName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
	if err := client.StorageV1().StorageClasses().Delete(ctx, growthName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
}

func ptr[T any](v T) *T { return &v }
