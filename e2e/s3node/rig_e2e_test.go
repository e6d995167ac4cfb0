//go:build e2e

package s3node

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/stowage-csi/stowage/e2e/cluster"
	"github.com/stowage-csi/stowage/e2e/cluster/clustertest"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3server"
	"github.com/stowage-csi/stowage/shared/s3api"
)

const (
	nodeName  = "s3-node-1"
	namespace = s3api.DefaultMountpointNamespace
)

// crdYAML is the attachment CRD as upstream declares it (v2, cluster-scoped, spec.nodeName selectable),
// reduced to what the node reads.
const crdYAML = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: mountpoints3podattachments.s3.csi.aws.com
spec:
  group: s3.csi.aws.com
  scope: Cluster
  names: {kind: MountpointS3PodAttachment, listKind: MountpointS3PodAttachmentList, plural: mountpoints3podattachments, singular: mountpoints3podattachment, shortNames: [s3pa]}
  versions:
  - name: v2
    served: true
    storage: true
    selectableFields: [{jsonPath: .spec.nodeName}]
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
            properties:
              nodeName: {type: string}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// env is one test's world: control plane, S3 server, kubelet root, running s3-node and a CSI client.
type env struct {
	t       *testing.T
	c       *cluster.Cluster
	srv     *s3server.Server
	dyn     dynamic.Interface
	kubelet string
	node    csi.NodeClient
	proc    *rig.Process
}

func setup(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts FUSE and must run as root")
	}
	ctx := context.Background()
	e := &env{t: t, c: clustertest.Start(t), srv: s3server.Start(t)}
	var err error
	if e.dyn, err = dynamic.NewForConfig(e.c.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	crd := filepath.Join(t.TempDir(), "crd.yaml")
	if err := os.WriteFile(crd, []byte(crdYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Apply(ctx, crd, filepath.Join(root, "deploy", "rbac", "s3-node.yaml"), filepath.Join(root, "deploy", "csidriver", "s3.csi.aws.com.yaml")); err != nil {
		t.Fatal(err)
	}
	// The Node starts tainted, as node groups that use the startup taint create it; its CSINode lists
	// the driver, as the kubelet writes it once the registrar has registered the plugin.
	client := e.c.Client()
	if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: s3api.TaintAgentNotReady, Effect: corev1.TaintEffectNoExecute}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.StorageV1().CSINodes().Create(ctx, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: s3api.DriverName, NodeID: nodeName}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc, err := e.c.ServiceAccountKubeconfig(ctx, "kube-system", "s3-csi-driver-sa")
	if err != nil {
		t.Fatal(err)
	}

	// The kubelet root must be reachable by paths; the socket gets a short directory of its own.
	base, err := os.MkdirTemp("", "s3node-")
	if err != nil {
		t.Fatal(err)
	}
	// Traversable by the unprivileged Mountpoint stand-in, which reads its credentials by host path (the
	// real Pod sees only its comm directory, at /comm).
	e.kubelet = filepath.Join(base, "kubelet")
	if err := os.MkdirAll(e.kubelet, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unmountUnder(t, base)
		_ = os.RemoveAll(base)
	})
	sock := filepath.Join(base, "csi.sock")
	e.proc, err = rig.Start(rig.Spec{Name: "s3-node", Path: s3NodeBin, LogDir: t.TempDir(), Args: []string{
		"--endpoint=unix://" + sock, "--kubeconfig=" + kc, "--v=4", "--unmount-sweep-interval=3s",
	}, Env: []string{
		"CSI_NODE_NAME=" + nodeName, "CONTAINER_KUBELET_PATH=" + e.kubelet, "MOUNTPOINT_NAMESPACE=" + namespace,
		// The driver's long-term keys: Mountpoint gets them as an AWS profile in the comm directory.
		"AWS_ACCESS_KEY_ID=" + e.srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + e.srv.SecretKey, "AWS_REGION=" + s3server.Region,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.proc.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("s3-node log:\n%s", e.proc.Tail(200))
		}
	})
	// Every call gets the kubelet's deadline, so a publish that hangs fails the test instead of its timeout.
	deadline := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()), deadline)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e.node = csi.NewNodeClient(conn)
	rig.Eventually(t, ctx, 2*time.Minute, "s3-node serving CSI", func(ctx context.Context) (bool, error) {
		if exited, err := e.proc.Exited(); exited {
			return false, fmt.Errorf("s3-node exited: %v", err)
		}
		_, err := e.node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
		return err == nil, err
	})
	return e
}

// mpPod creates a Mountpoint Pod object on the node, sets it Running through the status subresource,
// creates its comm dir on the host and starts the test's stand-in for its container.
func (e *env) mpPod(ctx context.Context, name string) (*corev1.Pod, *mountpointPod) {
	e.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			NodeName:        nodeName,
			Tolerations:     []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1000)},
			Containers: []corev1.Container{{Name: s3api.MountpointContainerName, Image: "stowage/s3-mounter:e2e",
				SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000),
					AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				VolumeMounts: []corev1.VolumeMount{{Name: s3api.CommVolumeName, MountPath: s3api.CommDir}}}},
			Volumes: []corev1.Volume{{Name: s3api.CommVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}},
		},
	}
	pods := e.c.Client().CoreV1().Pods(namespace)
	pod, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	if pod, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	// The kubelet makes an emptyDir of a Pod with an fsGroup group-owned by it, with the setgid bit, so
	// the credential files the node writes take the group Mountpoint reads them through.
	comm := e.commDir(pod)
	if err := os.MkdirAll(comm, 0o777); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chown(comm, 0, mountpointUID); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chmod(comm, os.ModeSetgid|0o777); err != nil {
		e.t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	mp := startMountpointPod(pctx, comm)
	e.t.Cleanup(func() {
		cancel()
		<-mp.done
		if e.t.Failed() {
			e.t.Logf("Mountpoint Pod %s output:\n%s", name, mp.output())
		}
	})
	return pod, mp
}

func (e *env) commDir(pod *corev1.Pod) string {
	return filepath.Join(e.kubelet, "pods", string(pod.UID), "volumes", "kubernetes.io~empty-dir", "comm")
}

func (e *env) source(mpPod string) string {
	return filepath.Join(e.kubelet, "plugins", s3api.DriverName, "mnt", mpPod)
}

func (e *env) target(workloadUID, pv string) string {
	return filepath.Join(e.kubelet, "pods", workloadUID, "volumes", "kubernetes.io~csi", pv, "mount")
}

// attachment creates the S3PA the controller would: pv on this node, served by mpPod for the workloads.
func (e *env) attachment(ctx context.Context, pv, volumeID, mpPod string, workloads ...string) *unstructured.Unstructured {
	e.t.Helper()
	a := &s3api.MountpointS3PodAttachment{
		TypeMeta:   metav1.TypeMeta{APIVersion: s3api.SchemeGroupVersion.String(), Kind: s3api.Kind},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "s3pa-"},
		Spec: s3api.MountpointS3PodAttachmentSpec{NodeName: nodeName, PersistentVolumeName: pv, VolumeID: volumeID,
			AuthenticationSource: s3api.AuthenticationSourceDriver, MountpointS3PodAttachments: map[string][]s3api.WorkloadPodAttachment{}},
	}
	for _, w := range workloads {
		a.Spec.MountpointS3PodAttachments[mpPod] = append(a.Spec.MountpointS3PodAttachments[mpPod], s3api.WorkloadPodAttachment{WorkloadPodUID: w, AttachmentTime: metav1.Now()})
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a)
	if err != nil {
		e.t.Fatal(err)
	}
	created, err := e.dyn.Resource(s3api.GroupVersionResource()).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return created
}

// publishReq is what the kubelet sends for a PV with these mount options.
func (e *env) publishReq(bucket, pv, volumeID, workload string, options ...string) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{
		VolumeId:   volumeID,
		TargetPath: e.target(workload, pv),
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{MountFlags: options}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		},
		VolumeContext: map[string]string{"bucketName": bucket, "csi.storage.k8s.io/pod.uid": workload,
			"csi.storage.k8s.io/pod.namespace": "default", "csi.storage.k8s.io/serviceAccount.name": "default"},
	}
}

// mountOptions point Mountpoint at the test's S3 server.
func (e *env) mountOptions(extra ...string) []string {
	return append([]string{"endpoint-url " + e.srv.Endpoint, "force-path-style", "region " + s3server.Region}, extra...)
}

// mounts returns the mount points under dir, from this process's mount table.
func mounts(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			out = append(out, fields[4])
		}
	}
	return out
}

// unmountUnder lazily unmounts everything under dir, deepest first, whatever the test left.
func unmountUnder(t *testing.T, dir string) {
	left := mounts(dir)
	sort.Sort(sort.Reverse(sort.StringSlice(left)))
	for _, m := range left {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			t.Logf("cleanup: unmount %s: %v", m, err)
		}
	}
}
