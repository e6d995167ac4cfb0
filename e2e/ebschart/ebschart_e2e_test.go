//go:build e2e

package ebschart_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/stowage-csi/stowage/e2e/ebsinstall"
	"github.com/stowage-csi/stowage/e2e/images"
	"github.com/stowage-csi/stowage/e2e/rig"
)

// TestE2EEBSChartOnRealNodes installs stowage-ebs with `helm install` and its default values, overriding only
// the images (assembled here), the pull policy and the emulator's endpoints (package ebsinstall). The real
// kubelets register the driver, the startup taint goes, and a Pod on each node writes to and reads from a
// volume the chart's controller provisioned and attached; deleting the claims leaves EC2 without volumes.
// Then three broken installs on the same nodes each fail with the reason the API server or the kubelet gave.
func TestE2EEBSChartOnRealNodes(t *testing.T) {
	ctx := context.Background()
	s := ebsinstall.ForTest(t, ebsinstall.Options{})
	client := s.Cluster.Client()
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "gp3"},
		Provisioner:       ebsinstall.Driver,
		Parameters:        map[string]string{"type": "gp3"},
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if _, err := client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range s.Cluster.Nodes {
		writeAndRead(t, ctx, client, n.Name)
	}
	rig.Eventually(t, ctx, 3*time.Minute, "ec2sim to hold no volume after the claims went", func(context.Context) (bool, error) {
		return len(s.EC2.State().Volumes) == 0, nil
	})

	// The install's checks are what every test on these nodes stands on: a node plugin the kubelet cannot
	// register, and chart values that keep the node Pod from starting, must each fail the install with what
	// the API server or the kubelet said, not pass unnoticed. Each reinstall is bounded so the failure comes in minutes.
	t.Run("BrokenRegistration", func(t *testing.T) {
		// The registrar hands the kubelet a socket nobody serves: the kubelet's NodeGetInfo fails, the
		// registrar hears so and exits, as upstream's does.
		err := reinstallFailing(t, s, map[string]any{"sidecars": map[string]any{"nodeDriverRegistrar": map[string]any{
			"additionalArgs": []string{"--kubelet-registration-path=/var/lib/kubelet/plugins/nobody/csi.sock"}}}})
		for _, want := range []string{"container node-driver-registrar:", "exit code 1"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the failed install's error lacks %q:\n%v", want, err)
			}
		}
	})
	t.Run("NodePodNotPrivileged", func(t *testing.T) {
		// The API server refuses the node plugin's Bidirectional mount propagation in a container that is not
		// privileged: the DaemonSet is not created.
		err := reinstallFailing(t, s, map[string]any{"node": map[string]any{"containerSecurityContext": map[string]any{"privileged": false}}})
		for _, want := range []string{"helm install", "ebs-csi-node", "Bidirectional mount propagation is available only to privileged containers"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the failed install's error lacks %q:\n%v", want, err)
			}
		}
	})
	t.Run("KubeletPathElsewhere", func(t *testing.T) {
		// A kubelet root of another distribution (k0s's) that this node lacks: the kubelet cannot mount the
		// node plugin's kubelet-dir, and no container of the node Pod starts.
		err := reinstallFailing(t, s, map[string]any{"node": map[string]any{"kubeletPath": "/var/lib/k0s/kubelet"}})
		for _, want := range []string{"helm install", "container ebs-plugin: waiting: ContainerCreating", "FailedMount", "/var/lib/k0s/kubelet"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the failed install's error lacks %q:\n%v", want, err)
			}
		}
	})
}

// reinstallFailing reinstalls the chart with values that break it and returns the install's error; the
// test fails if the install succeeds.
func reinstallFailing(t *testing.T, s *ebsinstall.Stack, values map[string]any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := s.Reinstall(ctx, values)
	if err == nil {
		t.Fatalf("the chart installed and registered with %v", values)
	}
	t.Logf("the install failed as it must:\n%v", err)
	return err
}

// writeAndRead runs a Pod on nodeName with a new claim, which writes a file and reads it back, then deletes
// both.
func writeAndRead(t *testing.T, ctx context.Context, client kubernetes.Interface, nodeName string) {
	t.Helper()
	name := "data-" + nodeName
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("gp3"),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := client.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  map[string]string{"kubernetes.io/hostname": nodeName},
			Containers: []corev1.Container{{
				Name: "write", Image: images.BusyboxImage,
				Command:      []string{"sh", "-c", "echo hello from " + nodeName + " > /data/f && sync && cat /data/f && grep -q ' /data ' /proc/mounts"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}},
		},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, ctx, 4*time.Minute, "Pod "+name+" to write and read its volume", func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodFailed {
			logs, _ := client.CoreV1().Pods("default").GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
			t.Fatalf("Pod %s failed: %s", name, logs)
		}
		return p.Status.Phase == corev1.PodSucceeded, nil
	})
	logs, err := client.CoreV1().Pods("default").GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := "hello from " + nodeName; !strings.Contains(string(logs), want) {
		t.Errorf("Pod %s printed %q, want %q", name, logs, want)
	}
	if err := client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, ctx, 2*time.Minute, "Pod "+name+" to go", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err := client.CoreV1().PersistentVolumeClaims("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
