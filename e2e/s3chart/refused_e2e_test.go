//go:build e2e

package s3chart_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// refusedOption mounts a volume with a mount option the node plugin refuses (--ca-bundle, which upstream's
// driver refuses too): the kubelet's FailedMount Event on the workload Pod names the option and says why, and
// deleting the Pod and the volume leaves nothing behind.
func refusedOption(t *testing.T, ctx context.Context, client kubernetes.Interface, endpoint string) {
	const name = "s3-refused"
	createVolume(t, ctx, client, endpoint, name, []string{"ca-bundle /etc/ssl/ca.pem"})
	pod := workload(t, ctx, client, "refused", "node-a", name, "echo mounted && exec sleep 3600")
	var message string
	rig.Eventually(t, ctx, 3*time.Minute, "a FailedMount Event on Pod refused naming --ca-bundle", func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events(workNS).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": pod.Name, "involvedObject.uid": string(pod.UID), "reason": "FailedMount"}.String()})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if strings.Contains(e.Message, "--ca-bundle") && strings.Contains(e.Message, "not supported") {
				message = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("Event: %s", message)
	p, err := client.CoreV1().Pods(workNS).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodPending {
		t.Errorf("Pod %s is %s with a refused mount option, want Pending", pod.Name, p.Status.Phase)
	}
	deletePods(t, ctx, client, pod.Name)
	if err := client.CoreV1().PersistentVolumeClaims(workNS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, ctx, 4*time.Minute, "the refused volume's Mountpoint Pods to go", func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(s3api.DefaultMountpointNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		_, err = client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		return len(pods.Items) == 0 && apierrors.IsNotFound(err), nil
	})
}
