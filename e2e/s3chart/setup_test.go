//go:build e2e || bench

package s3chart_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/images"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3server"
	"github.com/stowage-csi/stowage/shared/s3api"
)

const (
	// bucket is also how the teardown finds Mountpoint processes on the machine: a name no other test uses.
	bucket = "s3chart-e2e-bucket"
	volume = "s3-data"
	workNS = "default"
)

// createVolume creates a static PV for the bucket with the S3 server's endpoint in its mount options (as
// upstream documents for S3-compatible servers), plus extra, and a claim bound to it.
func createVolume(t *testing.T, ctx context.Context, client kubernetes.Interface, endpoint, name string, extra []string) {
	t.Helper()
	size := resource.MustParse("1200Gi") // ignored by the driver, required by the API
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			MountOptions: append([]string{"endpoint-url " + endpoint, "force-path-style", "region " + s3server.Region,
				"allow-delete"}, extra...),
			ClaimRef: &corev1.ObjectReference{Namespace: workNS, Name: name},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: s3api.DriverName, VolumeHandle: name + "-handle", VolumeAttributes: map[string]string{"bucketName": bucket},
			}},
		},
	}
	if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	empty := ""
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: workNS},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &empty,
			VolumeName:       name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if _, err := client.CoreV1().PersistentVolumeClaims(workNS).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, ctx, time.Minute, "claim "+name+" to be Bound", func(ctx context.Context) (bool, error) {
		c, err := client.CoreV1().PersistentVolumeClaims(workNS).Get(ctx, name, metav1.GetOptions{})
		return err == nil && c.Status.Phase == corev1.ClaimBound, err
	})
}

// workload creates a busybox Pod on nodeName with the claim at /data running script.
func workload(t *testing.T, ctx context.Context, client kubernetes.Interface, name, nodeName, claim, script string) *corev1.Pod {
	t.Helper()
	return createWorkload(t, ctx, client, name, nodeName, claim, script, false)
}

// createWorkload is workload, with the claim mounted read-only if readOnly.
func createWorkload(t *testing.T, ctx context.Context, client kubernetes.Interface, name, nodeName, claim, script string, readOnly bool) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: workNS},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  map[string]string{"kubernetes.io/hostname": nodeName},
			// The workload's own signal handling: busybox's sleep as PID 1 ignores SIGTERM.
			TerminationGracePeriodSeconds: ptr(int64(1)),
			Containers: []corev1.Container{{
				Name: "app", Image: images.BusyboxImage, Command: []string{"sh", "-c", script},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly}}}},
		},
	}
	created, err := client.CoreV1().Pods(workNS).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A failed case leaves its Pods to this, and the next case waits for their Mountpoint Pods to go.
	t.Cleanup(func() {
		err := client.CoreV1().Pods(workNS).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Pod %s: %v", name, err)
		}
	})
	return created
}

// waitLog waits for the Pod's log to hold want, and fails at once if the Pod fails.
func waitLog(t *testing.T, ctx context.Context, client kubernetes.Interface, name, want string) {
	t.Helper()
	var status string
	var logs []byte
	defer func() {
		if t.Failed() {
			t.Logf("Pod %s: %s; its log:\n%s\nits Events:\n%s", name, status, logs, podEvents(ctx, client, name))
		}
	}()
	rig.Eventually(t, ctx, 4*time.Minute, "Pod "+name+" to print "+want, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(workNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		status = fmt.Sprintf("%s on %s, %+v", p.Status.Phase, p.Spec.NodeName, p.Status.ContainerStatuses)
		logs, _ = client.CoreV1().Pods(workNS).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if p.Status.Phase == corev1.PodFailed {
			t.Fatalf("Pod %s failed: %s", name, logs)
		}
		return strings.Contains(string(logs), want), nil
	})
}

// podEvents are the Events of the Pod in the workload namespace, one a line.
func podEvents(ctx context.Context, client kubernetes.Interface, name string) string {
	events, err := client.CoreV1().Events(workNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range events.Items {
		fmt.Fprintf(&b, "%s %s: %s\n", e.Type, e.Reason, e.Message)
	}
	return b.String()
}

// deletePods deletes the Pods and waits for them to be gone.
func deletePods(t *testing.T, ctx context.Context, client kubernetes.Interface, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := client.CoreV1().Pods(workNS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		rig.Eventually(t, ctx, 3*time.Minute, "Pod "+name+" to go", func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().Pods(workNS).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
}

func ptr[T any](v T) *T { return &v }
