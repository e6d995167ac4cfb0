//go:build e2e

package ebschart_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
	"github.com/stowage-csi/stowage/e2e/helm"
	"github.com/stowage-csi/stowage/e2e/images"
	"github.com/stowage-csi/stowage/e2e/node"
	"github.com/stowage-csi/stowage/e2e/node/nodetest"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/tools"
)

const (
	driver     = "ebs.csi.aws.com"
	startTaint = "ebs.csi.aws.com/agent-not-ready"
	namespace  = "kube-system"
	imageTag   = "e2e"
	region     = "us-east-1"
	// linkDir is where Nitro instances' udev rules put the NVMe by-id links, and where the node plugin looks:
	// the node plugin Pods see the host's /dev.
	linkDir = "/dev/disk/by-id"
)

// TestE2EEBSChartOnRealNodes installs stowage-ebs with `helm install` and its default values, overriding only
// the images (assembled here), the pull policy and the emulator's endpoints. The real kubelets register the
// driver, the startup taint goes, and a Pod on each node writes to and reads from a volume the chart's
// controller provisioned and attached; deleting the claims leaves EC2 without volumes.
func TestE2EEBSChartOnRealNodes(t *testing.T) {
	ctx := context.Background()
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	archives := stowageImages(t, ctx, root)

	// Two real nodes in two zones, each an ec2sim instance, registered with the driver's startup taint as
	// upstream's documentation recommends.
	specs := []node.Spec{
		{Name: "node-a", Zone: region + "a", Taints: []string{startTaint + "=true:NoExecute"}},
		{Name: "node-b", Zone: region + "b", Taints: []string{startTaint + "=true:NoExecute"}},
	}
	c := nodetest.Start(t, specs, archives...)
	client := c.Client()
	if err := c.InstallSnapshotCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	ec2 := startEC2(t, ctx, c)

	for _, obj := range []struct {
		name string
		data map[string]string
	}{
		{"aws-meta", map[string]string{"endpoint": ec2.URL()}},
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: obj.name, Namespace: namespace}, Data: obj.data}
		if _, err := client.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// ec2sim does not check signatures here; the SDK wants credentials all the same.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "aws-secret", Namespace: namespace},
		StringData: map[string]string{"key_id": "AKIDEXAMPLE", "access_key": "example-secret"}}
	if _, err := client.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	h, err := helm.New(ctx, c.Kubeconfig(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if out, err := h.Install(ctx, "stowage-ebs", filepath.Join(root, "deploy", "helm", "stowage-ebs"), namespace,
		values(ec2), 5*time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, c.NodeLogTail(20))
	} else {
		t.Logf("helm install:\n%s", out)
	}
	t.Cleanup(func() {
		if _, err := h.Uninstall(context.Background(), "stowage-ebs", namespace); err != nil {
			t.Errorf("helm uninstall: %v", err)
		}
	})

	for _, n := range c.Nodes {
		waitRegistered(t, ctx, client, n.Name)
	}
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "gp3"},
		Provisioner:       driver,
		Parameters:        map[string]string{"type": "gp3"},
		VolumeBindingMode: ptr(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if _, err := client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		writeAndRead(t, ctx, client, n.Name)
	}
	rig.Eventually(t, ctx, 3*time.Minute, "ec2sim to hold no volume after the claims went", func(context.Context) (bool, error) {
		return len(ec2.State().Volumes) == 0, nil
	})
}

// stowageImages builds the Stowage binaries and assembles their images, as the charts name them.
func stowageImages(t *testing.T, ctx context.Context, root string) []string {
	t.Helper()
	bin := t.TempDir()
	if err := images.BuildBinaries(ctx, root, bin); err != nil {
		t.Fatal(err)
	}
	archives, err := images.Assemble(ctx, images.Options{RepoRoot: root, BinDir: bin, CacheDir: tools.CacheDir(root), Tag: imageTag})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, a := range archives {
		paths = append(paths, a.Path)
	}
	return paths
}

// startEC2 starts ec2sim on the Pod network's gateway, with one local instance per node whose Pods' range is
// the instance's IMDS callers, and its NVMe links in the host's /dev, which it removes when the test ends.
func startEC2(t *testing.T, ctx context.Context, c *node.Cluster) *ec2sim.Server {
	t.Helper()
	removeLinkDir := createdDirs(t, linkDir)
	var ins []ec2sim.Instance
	for i := range c.Nodes {
		start, _ := c.Network.NodeRange(i)
		callers := &net.IPNet{IP: start.Mask(net.CIDRMask(24, 32)), Mask: net.CIDRMask(24, 32)}
		zone := region + string(rune('a'+i))
		ins = append(ins, ec2sim.Instance{ID: fmt.Sprintf("i-%017x", 0xa001+i), Zone: zone, Type: "m5.large", Local: true, Callers: callers})
	}
	gw := c.Network.Gateway.String()
	s, err := ec2sim.Start(ctx, ec2sim.Config{
		Listen: net.JoinHostPort(gw, "0"), IMDSListen: net.JoinHostPort(gw, "0"),
		DataDir: t.TempDir(), Region: region, Instances: ins, DeviceLinkDir: linkDir, TimeScale: 0.02,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close ec2sim: %v", err)
		}
		removeLinkDir()
	})
	return s
}

// createdDirs returns a function that removes the directories of path that do not exist now, deepest first.
func createdDirs(t *testing.T, path string) func() {
	var missing []string
	for p := path; p != "/"; p = filepath.Dir(p) {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, p)
		}
	}
	return func() {
		for _, p := range missing {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("remove %s the test created: %v", p, err)
			}
		}
	}
}

// values are the chart's defaults but for the images (assembled here, never pulled) and the emulator's IMDS.
func values(ec2 *ec2sim.Server) map[string]any {
	image := func(name string) map[string]any {
		return map[string]any{"repository": "stowage/" + name, "tag": imageTag, "pullPolicy": "Never"}
	}
	sidecar := func(name string) map[string]any { return map[string]any{"image": image(name)} }
	env := []map[string]string{{"name": "AWS_EC2_METADATA_SERVICE_ENDPOINT", "value": ec2.SharedIMDSURL()}}
	return map[string]any{
		"image": image("ebs-plugin"),
		"sidecars": map[string]any{
			"provisioner": sidecar("csi-provisioner"), "attacher": sidecar("csi-attacher"),
			"snapshotter": sidecar("csi-snapshotter"), "resizer": sidecar("csi-resizer"),
			"livenessProbe": sidecar("livenessprobe"), "nodeDriverRegistrar": sidecar("csi-node-driver-registrar"),
		},
		"controller": map[string]any{"env": append(env, map[string]string{"name": "AWS_REGION", "value": region})},
		"node":       map[string]any{"env": env},
	}
}

// waitRegistered waits for the real kubelet to list the driver in the node's CSINode with an attach limit and
// the topology key, for the node's zone label of the driver, and for the startup taint to be gone.
func waitRegistered(t *testing.T, ctx context.Context, client kubernetes.Interface, nodeName string) {
	t.Helper()
	rig.Eventually(t, ctx, 3*time.Minute, "the kubelet to register "+driver+" on "+nodeName, func(ctx context.Context) (bool, error) {
		csiNode, err := client.StorageV1().CSINodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, d := range csiNode.Spec.Drivers {
			if d.Name == driver {
				return d.Allocatable != nil && d.Allocatable.Count != nil && *d.Allocatable.Count > 0 &&
					slices.Contains(d.TopologyKeys, "topology.ebs.csi.aws.com/zone"), nil
			}
		}
		return false, nil
	})
	rig.Eventually(t, ctx, 2*time.Minute, "the startup taint to leave "+nodeName, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if n.Labels["topology.ebs.csi.aws.com/zone"] == "" {
			return false, nil
		}
		return !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == startTaint }), nil
	})
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
			StorageClassName: ptr("gp3"),
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

func ptr[T any](v T) *T { return &v }
