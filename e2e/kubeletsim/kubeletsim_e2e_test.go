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
	"github.com/stowage-csi/stowage/e2e/rig"
)

const (
	nodeName = "sim-node-1"
	pvName   = "pv-static-1"
	handle   = "vol-static-1"
	audience = "fake-audience"
)

// mounts lists the mount points under dir.
func mounts(t *testing.T, dir string) []string {
	t.Helper()
	left, err := kubeletsim.MountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	return left
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
// ephemeral), a generic ephemeral claim the Pod does not own, fsGroup, volumesInUse, expansion, graceful deletion and Stop's cleanup, each a subtest on the
// same node and Pod.
func TestE2EKubeletSimulator(t *testing.T) {
	n := startSimNode(t)
	t.Run("registration", n.checkRegistration)
	t.Run("ephemeral claim not owned by the Pod", n.checkStrayEphemeralClaim)
	n.startApp(t)
	t.Run("stage and publish", n.checkStageAndPublish)
	t.Run("expansion", n.checkExpansion)
	t.Run("graceful deletion", n.checkGracefulDeletion)
	t.Run("stop unmounts everything", n.checkStop)
}

// simNode is one simulated node with its fake plugin and, once startApp ran, the Pod app using claim-1.
type simNode struct {
	ctx    context.Context
	kube   kubernetes.Interface
	plugin *fakePlugin
	node   *kubeletsim.Node
	root   string
	pod    *v1.Pod
	target string // claim-1's publish path in app
}

// startSimNode starts a control plane, the fake plugin, its CSIDriver (pod info, a token, both lifecycle
// modes, fsGroupPolicy File) and the simulated node; the node is stopped when the test ends, and must leave
// no mount.
func startSimNode(t *testing.T) *simNode {
	c := clustertest.Start(t)
	n := &simNode{ctx: context.Background(), kube: c.Client(), plugin: startFakePlugin(t), root: t.TempDir()}
	_, err := n.kube.StorageV1().CSIDrivers().Create(n.ctx, &storagev1.CSIDriver{
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
	n.node, err = kubeletsim.Start(n.ctx, kubeletsim.Config{
		Client: n.kube, NodeName: nodeName, Zone: "us-east-1a", InstanceType: "m5.large", PluginSocket: n.plugin.socket, RootDir: n.root,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.node.Stop(); err != nil {
			t.Errorf("stop node: %v", err)
		}
		if left := mounts(t, n.root); len(left) > 0 {
			t.Errorf("mounts left after Stop: %v", left)
		}
	})
	return n
}

func (n *simNode) checkRegistration(t *testing.T) {
	node, err := n.kube.CoreV1().Nodes().Get(n.ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{kubeletsim.LabelZone: "us-east-1a", kubeletsim.LabelInstanceType: "m5.large", fakeTopKey: fakeZone} {
		if node.Labels[k] != want {
			t.Errorf("node label %s = %q, want %q", k, node.Labels[k], want)
		}
	}
	if node.Annotations["volumes.kubernetes.io/controller-managed-attach-detach"] != "true" ||
		node.Annotations["csi.volume.kubernetes.io/nodeid"] != `{"`+fakeDriver+`":"`+fakeNodeID+`"}` {
		t.Errorf("node annotations = %v", node.Annotations)
	}
	if len(node.Status.Conditions) == 0 || node.Status.Conditions[0].Type != v1.NodeReady || node.Status.Conditions[0].Status != v1.ConditionTrue {
		t.Errorf("node conditions = %v", node.Status.Conditions)
	}
	cn, err := n.kube.StorageV1().CSINodes().Get(n.ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cn.Spec.Drivers) != 1 {
		t.Fatalf("csinode drivers = %v", cn.Spec.Drivers)
	}
	d := cn.Spec.Drivers[0]
	if d.Name != fakeDriver || d.NodeID != fakeNodeID || !slices.Equal(d.TopologyKeys, []string{fakeTopKey}) ||
		d.Allocatable == nil || *d.Allocatable.Count != 5 || len(cn.OwnerReferences) != 1 || cn.OwnerReferences[0].UID != node.UID {
		t.Errorf("csinode = %+v", cn)
	}
	if _, err := n.kube.CoordinationV1().Leases("kube-node-lease").Get(n.ctx, nodeName, metav1.GetOptions{}); err != nil {
		t.Errorf("node lease: %v", err)
	}
}

// startApp creates a static ext4 PV bound to claim-1 and the Pod app using it (and an inline volume), and
// waits until app runs.
func (n *simNode) startApp(t *testing.T) {
	fs := v1.PersistentVolumeFilesystem
	_, err := n.kube.CoreV1().PersistentVolumes().Create(n.ctx, &v1.PersistentVolume{
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
	_, err = n.kube.CoreV1().PersistentVolumeClaims("default").Create(n.ctx, &v1.PersistentVolumeClaim{
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
	if _, err := n.kube.CoreV1().Pods("default").Create(n.ctx, appPod("app", 3000), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.pod = n.waitRunning(t, "app")
	n.target = n.node.PublishPath(string(n.pod.UID), pvName)
}

func (n *simNode) waitRunning(t *testing.T, name string) *v1.Pod {
	t.Helper()
	var pod *v1.Pod
	rig.Eventually(t, n.ctx, time.Minute, "pod "+name+" Running", func(ctx context.Context) (bool, error) {
		var err error
		pod, err = n.kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && pod.Status.Phase == v1.PodRunning, err
	})
	return pod
}

func (n *simNode) checkStageAndPublish(t *testing.T) {
	stages := n.plugin.requests("NodeStageVolume")
	if len(stages) != 1 {
		t.Fatalf("NodeStageVolume calls = %d, want 1 (inline volumes are not staged)", len(stages))
	}
	st := stages[0].(*csi.NodeStageVolumeRequest)
	if st.GetVolumeId() != handle || st.GetStagingTargetPath() != n.node.StagingPath(handle) ||
		st.GetVolumeContext()["k"] != "v" || st.GetVolumeCapability().GetMount().GetFsType() != "ext4" ||
		st.GetVolumeCapability().GetAccessMode().GetMode() != csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER {
		t.Errorf("NodeStageVolume = %v", st)
	}
	n.checkPublishRequests(t)
	// Written through the published path, the data lands in the plugin's volume: the mounts are real.
	if err := os.WriteFile(filepath.Join(n.target, "hello.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(n.plugin.dataDir, handle, "hello.txt")); err != nil || string(b) != "hello" {
		t.Errorf("file in the plugin's volume: %q, %v", b, err)
	}
	// fsGroupPolicy File without VOLUME_MOUNT_GROUP: the kubelet changes the group itself.
	var st2 syscall.Stat_t
	if err := syscall.Stat(n.target, &st2); err != nil || st2.Gid != 3000 || st2.Mode&syscall.S_ISGID == 0 {
		t.Errorf("published dir gid %d mode %o (%v), want gid 3000 with setgid", st2.Gid, st2.Mode, err)
	}
	node, err := n.kube.CoreV1().Nodes().Get(n.ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []v1.UniqueVolumeName{v1.UniqueVolumeName("kubernetes.io/csi/" + fakeDriver + "^" + handle)}
	if !slices.Equal(node.Status.VolumesInUse, want) {
		t.Errorf("volumesInUse = %v, want %v", node.Status.VolumesInUse, want)
	}
	if len(n.pod.Status.ContainerStatuses) != 1 || !n.pod.Status.ContainerStatuses[0].Ready {
		t.Errorf("container statuses = %v", n.pod.Status.ContainerStatuses)
	}
}

// checkPublishRequests checks the two NodePublishVolume calls (claim-1 and the inline volume): read-only,
// staging path, pod info, tokens and the ephemeral flag in the volume context.
func (n *simNode) checkPublishRequests(t *testing.T) {
	t.Helper()
	pubs := n.plugin.requests("NodePublishVolume")
	if len(pubs) != 2 {
		t.Fatalf("NodePublishVolume calls = %d, want 2", len(pubs))
	}
	byTarget := map[string]*csi.NodePublishVolumeRequest{}
	for _, r := range pubs {
		byTarget[r.(*csi.NodePublishVolumeRequest).GetTargetPath()] = r.(*csi.NodePublishVolumeRequest)
	}
	claimPub, inlinePub := byTarget[n.target], byTarget[n.node.PublishPath(string(n.pod.UID), "scratch")]
	if claimPub == nil || inlinePub == nil {
		t.Fatalf("publish targets = %v", byTarget)
	}
	if claimPub.GetReadonly() || !inlinePub.GetReadonly() {
		t.Errorf("readonly: claim %v, inline %v; want false, true", claimPub.GetReadonly(), inlinePub.GetReadonly())
	}
	if claimPub.GetStagingTargetPath() != n.node.StagingPath(handle) || inlinePub.GetStagingTargetPath() != "" {
		t.Errorf("staging paths: claim %q, inline %q", claimPub.GetStagingTargetPath(), inlinePub.GetStagingTargetPath())
	}
	for _, r := range []*csi.NodePublishVolumeRequest{claimPub, inlinePub} {
		vc := r.GetVolumeContext()
		if vc["csi.storage.k8s.io/pod.name"] != "app" || vc["csi.storage.k8s.io/pod.namespace"] != "default" ||
			vc["csi.storage.k8s.io/pod.uid"] != string(n.pod.UID) || vc["csi.storage.k8s.io/serviceAccount.name"] != "default" {
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
}

func (n *simNode) checkExpansion(t *testing.T) {
	pv, err := n.kube.CoreV1().PersistentVolumes().Get(n.ctx, pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv.Spec.Capacity[v1.ResourceStorage] = resource.MustParse("2Gi")
	if _, err := n.kube.CoreV1().PersistentVolumes().Update(n.ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// What the resize controller leaves once ControllerExpandVolume is done and the node must grow the file system.
	patch := []byte(`{"status":{"allocatedResources":{"storage":"2Gi"},"allocatedResourceStatuses":{"storage":"NodeResizePending"}}}`)
	if _, err := n.kube.CoreV1().PersistentVolumeClaims("default").Patch(n.ctx, "claim-1", types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, n.ctx, time.Minute, "claim capacity 2Gi", func(ctx context.Context) (bool, error) {
		c, err := n.kube.CoreV1().PersistentVolumeClaims("default").Get(ctx, "claim-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		q := c.Status.Capacity[v1.ResourceStorage]
		return q.Cmp(resource.MustParse("2Gi")) == 0 && len(c.Status.AllocatedResourceStatuses) == 0, nil
	})
	exp := n.plugin.requests("NodeExpandVolume")
	if len(exp) != 1 {
		t.Fatalf("NodeExpandVolume calls = %d, want 1", len(exp))
	}
	r := exp[0].(*csi.NodeExpandVolumeRequest)
	if r.GetVolumeId() != handle || r.GetVolumePath() != n.target || r.GetStagingTargetPath() != n.node.StagingPath(handle) ||
		r.GetCapacityRange().GetRequiredBytes() != 2<<30 {
		t.Errorf("NodeExpandVolume = %v", r)
	}
}

func (n *simNode) checkGracefulDeletion(t *testing.T) {
	if err := n.kube.CoreV1().Pods("default").Delete(n.ctx, "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, n.ctx, time.Minute, "pod app gone", func(ctx context.Context) (bool, error) {
		_, err := n.kube.CoreV1().Pods("default").Get(ctx, "app", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if calls := len(n.plugin.requests("NodeUnpublishVolume")); calls != 2 {
		t.Errorf("NodeUnpublishVolume calls = %d, want 2", calls)
	}
	unstages := n.plugin.requests("NodeUnstageVolume")
	if len(unstages) != 1 || unstages[0].(*csi.NodeUnstageVolumeRequest).GetStagingTargetPath() != n.node.StagingPath(handle) {
		t.Errorf("NodeUnstageVolume = %v", unstages)
	}
	rig.Eventually(t, n.ctx, time.Minute, "volumesInUse empty", func(ctx context.Context) (bool, error) {
		node, err := n.kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		return err == nil && len(node.Status.VolumesInUse) == 0, err
	})
	if left := mounts(t, n.root); len(left) > 0 {
		t.Errorf("mounts left after deletion: %v", left)
	}
	if _, err := os.Stat(filepath.Join(n.root, "pods", string(n.pod.UID))); !os.IsNotExist(err) {
		t.Errorf("pod directory still there: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(n.plugin.dataDir, handle, "hello.txt")); err != nil || string(b) != "hello" {
		t.Errorf("volume data after teardown: %q, %v", b, err)
	}
}

func (n *simNode) checkStop(t *testing.T) {
	if _, err := n.kube.CoreV1().Pods("default").Create(n.ctx, appPod("app2", 3000), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitRunning(t, "app2")
	if len(mounts(t, n.root)) == 0 {
		t.Fatal("no mounts under the root while app2 runs")
	}
	if err := n.node.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := mounts(t, n.root); len(left) > 0 {
		t.Errorf("mounts left after Stop: %v", left)
	}
	if calls := len(n.plugin.requests("NodeUnstageVolume")); calls != 2 {
		t.Errorf("NodeUnstageVolume calls = %d, want 2", calls)
	}
}

func ptr[T any](v T) *T { return &v }

// checkStrayEphemeralClaim creates the claim <pod>-<volume> before its Pod, so the Pod does not own it: the
// kubelet must refuse to mount it and say so in a FailedMount Event, and the Pod must still be deletable.
func (n *simNode) checkStrayEphemeralClaim(t *testing.T) {
	claim := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "stray-data", Namespace: "default"},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: ptr(""),
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := n.kube.CoreV1().PersistentVolumeClaims("default").Create(n.ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.kube.CoreV1().PersistentVolumeClaims("default").Delete(n.ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName:   nodeName,
			Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{
				VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{Spec: claim.Spec},
			}}}},
		},
	}
	if _, err := n.kube.CoreV1().Pods("default").Create(n.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, n.ctx, time.Minute, "kubelet FailedMount Event on pod stray", func(ctx context.Context) (bool, error) {
		evs, err := n.kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=stray"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "FailedMount" && e.Source.Component == "kubelet" && e.Source.Host == nodeName &&
				strings.Contains(e.Message, "PVC default/stray-data was not created for pod default/stray (pod is not owner)") {
				return true, nil
			}
		}
		return false, nil
	})
	if got, err := n.kube.CoreV1().Pods("default").Get(n.ctx, "stray", metav1.GetOptions{}); err != nil || got.Status.Phase == v1.PodRunning {
		t.Errorf("pod stray: phase %v, %v; want not Running", got.Status.Phase, err)
	}
	if err := n.kube.CoreV1().Pods("default").Delete(n.ctx, "stray", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, n.ctx, time.Minute, "pod stray gone", func(ctx context.Context) (bool, error) {
		_, err := n.kube.CoreV1().Pods("default").Get(ctx, "stray", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
