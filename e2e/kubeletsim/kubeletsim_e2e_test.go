//go:build e2e

package kubeletsim_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/cluster/clustertest"
	"github.com/stowage-csi/stowage/e2e/kubeletsim"
)

const (
	nodeName = "sim-node-1"
	pvName   = "pv-static-1"
	handle   = "vol-static-1"
	audience = "fake-audience"
)

func waitUntil(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s (last error: %v)", what, last)
}

func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

func podRunning(t *testing.T, kube kubernetes.Interface, name string) *v1.Pod {
	t.Helper()
	var pod *v1.Pod
	waitUntil(t, "pod "+name+" Running", func() (bool, error) {
		var err error
		pod, err = kube.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && pod.Status.Phase == v1.PodRunning, err
	})
	return pod
}

func appPod(name string, fsGroup int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName:        nodeName,
			SecurityContext: &v1.PodSecurityContext{FSGroup: &fsGroup},
			Containers:      []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			Volumes: []v1.Volume{
				{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "claim-1"}}},
				{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: fakeDriver, ReadOnly: ptr(true), VolumeAttributes: map[string]string{"inline": "yes"}}}},
			},
		},
	}
}

// TestE2EKubeletSimulator runs one simulated node against a real control plane and a recording node plugin
// that does real bind mounts: registration, the volume context of stage and publish (pod info, tokens,
// ephemeral), fsGroup, volumesInUse, expansion, graceful deletion and Stop's cleanup.
func TestE2EKubeletSimulator(t *testing.T) {
	c := clustertest.Start(t)
	kube := c.Client()
	ctx := context.Background()
	plugin := startFakePlugin(t)

	_, err := kube.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: fakeDriver},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired: ptr(false), PodInfoOnMount: ptr(true),
			TokenRequests:        []storagev1.TokenRequest{{Audience: audience, ExpirationSeconds: ptr(int64(3600))}},
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral},
			FSGroupPolicy:        ptr(storagev1.FileFSGroupPolicy),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	root := t.TempDir()
	node, err := kubeletsim.Start(ctx, kubeletsim.Config{
		Client: kube, NodeName: nodeName, Zone: "us-east-1a", InstanceType: "m5.large", PluginSocket: plugin.socket, RootDir: root,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := node.Stop(); err != nil {
			t.Errorf("stop node: %v", err)
		}
		if left := mountsUnder(t, root); len(left) > 0 {
			t.Errorf("mounts left after Stop: %v", left)
		}
	})

	t.Run("registration", func(t *testing.T) {
		n, err := kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]string{kubeletsim.LabelZone: "us-east-1a", kubeletsim.LabelInstanceType: "m5.large", fakeTopKey: fakeZone} {
			if n.Labels[k] != want {
				t.Errorf("node label %s = %q, want %q", k, n.Labels[k], want)
			}
		}
		if n.Annotations["volumes.kubernetes.io/controller-managed-attach-detach"] != "true" ||
			n.Annotations["csi.volume.kubernetes.io/nodeid"] != `{"`+fakeDriver+`":"`+fakeNodeID+`"}` {
			t.Errorf("node annotations = %v", n.Annotations)
		}
		if len(n.Status.Conditions) == 0 || n.Status.Conditions[0].Type != v1.NodeReady || n.Status.Conditions[0].Status != v1.ConditionTrue {
			t.Errorf("node conditions = %v", n.Status.Conditions)
		}
		cn, err := kube.StorageV1().CSINodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(cn.Spec.Drivers) != 1 {
			t.Fatalf("csinode drivers = %v", cn.Spec.Drivers)
		}
		d := cn.Spec.Drivers[0]
		if d.Name != fakeDriver || d.NodeID != fakeNodeID || !slices.Equal(d.TopologyKeys, []string{fakeTopKey}) ||
			d.Allocatable == nil || *d.Allocatable.Count != 5 || len(cn.OwnerReferences) != 1 || cn.OwnerReferences[0].UID != n.UID {
			t.Errorf("csinode = %+v", cn)
		}
		if _, err := kube.CoordinationV1().Leases("kube-node-lease").Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
			t.Errorf("node lease: %v", err)
		}
	})

	fs := v1.PersistentVolumeFilesystem
	_, err = kube.CoreV1().PersistentVolumes().Create(ctx, &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: v1.PersistentVolumeSpec{
			Capacity:    v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, VolumeMode: &fs,
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &v1.ObjectReference{Namespace: "default", Name: "claim-1"},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: fakeDriver, VolumeHandle: handle, FSType: "ext4", VolumeAttributes: map[string]string{"k": "v"},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = kube.CoreV1().PersistentVolumeClaims("default").Create(ctx, &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim-1", Namespace: "default"},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: ptr(""), VolumeName: pvName,
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:   v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Pods("default").Create(ctx, appPod("app", 3000), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := podRunning(t, kube, "app")
	target := node.PublishPath(string(pod.UID), pvName)

	t.Run("stage and publish", func(t *testing.T) {
		stages := plugin.requests("NodeStageVolume")
		if len(stages) != 1 {
			t.Fatalf("NodeStageVolume calls = %d, want 1 (inline volumes are not staged)", len(stages))
		}
		st := stages[0].(*csi.NodeStageVolumeRequest)
		if st.GetVolumeId() != handle || st.GetStagingTargetPath() != node.StagingPath(handle) ||
			st.GetVolumeContext()["k"] != "v" || st.GetVolumeCapability().GetMount().GetFsType() != "ext4" ||
			st.GetVolumeCapability().GetAccessMode().GetMode() != csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER {
			t.Errorf("NodeStageVolume = %v", st)
		}
		pubs := plugin.requests("NodePublishVolume")
		if len(pubs) != 2 {
			t.Fatalf("NodePublishVolume calls = %d, want 2", len(pubs))
		}
		byTarget := map[string]*csi.NodePublishVolumeRequest{}
		for _, r := range pubs {
			byTarget[r.(*csi.NodePublishVolumeRequest).GetTargetPath()] = r.(*csi.NodePublishVolumeRequest)
		}
		claimPub, inlinePub := byTarget[target], byTarget[node.PublishPath(string(pod.UID), "scratch")]
		if claimPub == nil || inlinePub == nil {
			t.Fatalf("publish targets = %v", byTarget)
		}
		if claimPub.GetReadonly() || !inlinePub.GetReadonly() {
			t.Errorf("readonly: claim %v, inline %v; want false, true", claimPub.GetReadonly(), inlinePub.GetReadonly())
		}
		if claimPub.GetStagingTargetPath() != node.StagingPath(handle) || inlinePub.GetStagingTargetPath() != "" {
			t.Errorf("staging paths: claim %q, inline %q", claimPub.GetStagingTargetPath(), inlinePub.GetStagingTargetPath())
		}
		for _, r := range []*csi.NodePublishVolumeRequest{claimPub, inlinePub} {
			vc := r.GetVolumeContext()
			if vc["csi.storage.k8s.io/pod.name"] != "app" || vc["csi.storage.k8s.io/pod.namespace"] != "default" ||
				vc["csi.storage.k8s.io/pod.uid"] != string(pod.UID) || vc["csi.storage.k8s.io/serviceAccount.name"] != "default" {
				t.Errorf("pod info in %s: %v", r.GetTargetPath(), vc)
			}
			var tokens map[string]struct{ Token, ExpirationTimestamp string }
			if err := json.Unmarshal([]byte(vc["csi.storage.k8s.io/serviceAccount.tokens"]), &tokens); err != nil || tokens[audience].Token == "" {
				t.Errorf("tokens in %s: %v (%v)", r.GetTargetPath(), vc["csi.storage.k8s.io/serviceAccount.tokens"], err)
			}
		}
		if claimPub.GetVolumeContext()["csi.storage.k8s.io/ephemeral"] != "false" || claimPub.GetVolumeContext()["k"] != "v" ||
			inlinePub.GetVolumeContext()["csi.storage.k8s.io/ephemeral"] != "true" || inlinePub.GetVolumeContext()["inline"] != "yes" ||
			!strings.HasPrefix(inlinePub.GetVolumeId(), "csi-") {
			t.Errorf("claim context %v; inline %s context %v", claimPub.GetVolumeContext(), inlinePub.GetVolumeId(), inlinePub.GetVolumeContext())
		}
		// Written through the published path, the data lands in the plugin's volume: the mounts are real.
		if err := os.WriteFile(filepath.Join(target, "hello.txt"), []byte("hello"), 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(plugin.dataDir, handle, "hello.txt")); err != nil || string(b) != "hello" {
			t.Errorf("file in the plugin's volume: %q, %v", b, err)
		}
		// fsGroupPolicy File without VOLUME_MOUNT_GROUP: the kubelet changes the group itself.
		var st2 syscall.Stat_t
		if err := syscall.Stat(target, &st2); err != nil || st2.Gid != 3000 || st2.Mode&syscall.S_ISGID == 0 {
			t.Errorf("published dir gid %d mode %o (%v), want gid 3000 with setgid", st2.Gid, st2.Mode, err)
		}
		n, err := kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := []v1.UniqueVolumeName{v1.UniqueVolumeName("kubernetes.io/csi/" + fakeDriver + "^" + handle)}
		if !slices.Equal(n.Status.VolumesInUse, want) {
			t.Errorf("volumesInUse = %v, want %v", n.Status.VolumesInUse, want)
		}
		if len(pod.Status.ContainerStatuses) != 1 || !pod.Status.ContainerStatuses[0].Ready {
			t.Errorf("container statuses = %v", pod.Status.ContainerStatuses)
		}
	})

	t.Run("expansion", func(t *testing.T) {
		pv, err := kube.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pv.Spec.Capacity[v1.ResourceStorage] = resource.MustParse("2Gi")
		if _, err := kube.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// What the resize controller leaves once ControllerExpandVolume is done and the node must grow the file system.
		patch := []byte(`{"status":{"allocatedResources":{"storage":"2Gi"},"allocatedResourceStatuses":{"storage":"NodeResizePending"}}}`)
		if _, err := kube.CoreV1().PersistentVolumeClaims("default").Patch(ctx, "claim-1", types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "claim capacity 2Gi", func() (bool, error) {
			c, err := kube.CoreV1().PersistentVolumeClaims("default").Get(ctx, "claim-1", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			q := c.Status.Capacity[v1.ResourceStorage]
			return q.Cmp(resource.MustParse("2Gi")) == 0 && len(c.Status.AllocatedResourceStatuses) == 0, nil
		})
		exp := plugin.requests("NodeExpandVolume")
		if len(exp) != 1 {
			t.Fatalf("NodeExpandVolume calls = %d, want 1", len(exp))
		}
		r := exp[0].(*csi.NodeExpandVolumeRequest)
		if r.GetVolumeId() != handle || r.GetVolumePath() != target || r.GetStagingTargetPath() != node.StagingPath(handle) ||
			r.GetCapacityRange().GetRequiredBytes() != 2<<30 {
			t.Errorf("NodeExpandVolume = %v", r)
		}
	})

	t.Run("graceful deletion", func(t *testing.T) {
		if err := kube.CoreV1().Pods("default").Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "pod app gone", func() (bool, error) {
			_, err := kube.CoreV1().Pods("default").Get(ctx, "app", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if n := len(plugin.requests("NodeUnpublishVolume")); n != 2 {
			t.Errorf("NodeUnpublishVolume calls = %d, want 2", n)
		}
		unstages := plugin.requests("NodeUnstageVolume")
		if len(unstages) != 1 || unstages[0].(*csi.NodeUnstageVolumeRequest).GetStagingTargetPath() != node.StagingPath(handle) {
			t.Errorf("NodeUnstageVolume = %v", unstages)
		}
		waitUntil(t, "volumesInUse empty", func() (bool, error) {
			n, err := kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			return err == nil && len(n.Status.VolumesInUse) == 0, err
		})
		if left := mountsUnder(t, root); len(left) > 0 {
			t.Errorf("mounts left after deletion: %v", left)
		}
		if _, err := os.Stat(filepath.Join(root, "pods", string(pod.UID))); !os.IsNotExist(err) {
			t.Errorf("pod directory still there: %v", err)
		}
		if b, err := os.ReadFile(filepath.Join(plugin.dataDir, handle, "hello.txt")); err != nil || string(b) != "hello" {
			t.Errorf("volume data after teardown: %q, %v", b, err)
		}
	})

	t.Run("stop unmounts everything", func(t *testing.T) {
		if _, err := kube.CoreV1().Pods("default").Create(ctx, appPod("app2", 3000), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		podRunning(t, kube, "app2")
		if len(mountsUnder(t, root)) == 0 {
			t.Fatal("no mounts under the root while app2 runs")
		}
		if err := node.Stop(); err != nil {
			t.Fatal(err)
		}
		if left := mountsUnder(t, root); len(left) > 0 {
			t.Errorf("mounts left after Stop: %v", left)
		}
		if n := len(plugin.requests("NodeUnstageVolume")); n != 2 {
			t.Errorf("NodeUnstageVolume calls = %d, want 2", n)
		}
	})
}

func ptr[T any](v T) *T { return &v }
