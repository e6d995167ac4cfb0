//go:build e2e

package s3controller

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/stowage-csi/stowage/e2e/cluster/clustertest"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/shared/s3api"
)

const (
	controllerNamespace = "kube-system"
	controllerSA        = "s3-csi-driver-controller-sa"
	mpNamespace         = s3api.DefaultMountpointNamespace
	nodeName            = "s3-node-1"
	image               = "public.ecr.aws/mountpoint-s3-csi-driver/aws-mountpoint-s3-csi-driver:v2.7.0"
	// waitTimeout bounds each wait for the controller or kube-controller-manager: they act in seconds, the
	// margin is for a machine busy with other builds.
	waitTimeout = 2 * time.Minute
	// staleInterval is the stale attachment cleaner's period and age, shortened from upstream's 2 minutes.
	staleInterval = 3 * time.Second
)

var resourceOne = resource.MustParse("1Gi")

var manifests = []string{
	"../../deploy/s3/mount-s3.yaml",
	"../../deploy/crds/s3.csi.aws.com_mountpoints3podattachments.yaml",
	"../../deploy/rbac/s3-controller.yaml",
}

// rig is a control plane with the S3 manifests applied and the s3-controller binary built.
type rig struct {
	client     kubernetes.Interface
	s3pa       dynamic.NamespaceableResourceInterface
	binary     string
	kubeconfig string
	metrics    string // the running controller's metrics address
	health     string
}

func startRig(t *testing.T) *rig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	root, err := e2erig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := e2erig.BuildCommand(ctx, root, "s3-controller", "s3-controller", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.Start(t)
	if err := c.Apply(ctx, manifests...); err != nil {
		t.Fatal(err)
	}
	r := &rig{client: c.Client(), binary: bin}
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	r.s3pa = dyn.Resource(s3api.GroupVersionResource())
	e2erig.Eventually(t, ctx, waitTimeout, "the MountpointS3PodAttachment CRD to be served", func(ctx context.Context) (bool, error) {
		_, err := r.s3pa.List(ctx, metav1.ListOptions{})
		return err == nil, err
	})
	if r.kubeconfig, err = c.ServiceAccountKubeconfig(ctx, controllerNamespace, controllerSA); err != nil {
		t.Fatal(err)
	}
	// The node the workloads are bound to (the Pod garbage collector deletes Pods of nodes that do not exist).
	if _, err := r.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return r
}

// startController runs s3-controller as the chart runs upstream's: configured by environment variables only,
// plus the kubeconfig of its ServiceAccount, free HTTP ports and a short stale cleaner period.
func (r *rig) startController(t *testing.T, name string) *e2erig.Process {
	t.Helper()
	r.metrics, r.health = e2erig.FreeAddr(t), e2erig.FreeAddr(t)
	p, err := e2erig.Start(e2erig.Spec{Name: name, Path: r.binary, LogDir: t.TempDir(),
		Args: []string{"--v=4", "--metrics-bind-address=" + r.metrics, "--health-probe-bind-address=" + r.health,
			fmt.Sprintf("--stale-attachment-interval=%s", staleInterval)},
		Env: []string{"KUBECONFIG=" + r.kubeconfig, "POD_NAMESPACE=" + controllerNamespace,
			"MOUNTPOINT_IMAGE=" + image, "MOUNTPOINT_IMAGE_PULL_POLICY=IfNotPresent", "MOUNTPOINT_NAMESPACE=" + mpNamespace,
			"MOUNTPOINT_PRIORITY_CLASS_NAME=mount-s3-critical", "MOUNTPOINT_VERSION=1.23.0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Signal(syscall.SIGKILL)
		<-p.Done()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.Tail(80))
		}
	})
	return p
}

// volume creates a static S3 PV and its claim and waits for kube-controller-manager to bind them.
func (r *rig) volume(t *testing.T, ctx context.Context, name string, mountOptions ...string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:         corev1.ResourceList{corev1.ResourceStorage: resourceOne},
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			MountOptions:     mountOptions,
			StorageClassName: "",
			ClaimRef:         &corev1.ObjectReference{Namespace: "default", Name: name},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: s3api.DriverName, VolumeHandle: name + "-bucket", VolumeAttributes: map[string]string{"bucketName": name + "-bucket"},
			}},
		},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, StorageClassName: ptr.To(""), VolumeName: name,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceOne}},
		},
	}
	if _, err := r.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e2erig.Eventually(t, ctx, waitTimeout, "claim "+name+" bound", func(ctx context.Context) (bool, error) {
		c, err := r.client.CoreV1().PersistentVolumeClaims("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && c.Status.Phase == corev1.ClaimBound, err
	})
}

type podOpt func(*corev1.Pod)

func readOnly(p *corev1.Pod) { p.Spec.Volumes[0].PersistentVolumeClaim.ReadOnly = true }
func fsGroup(g int64) podOpt {
	return func(p *corev1.Pod) { p.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: &g} }
}

// workload creates a Pod bound to the node that mounts claim, and returns its UID.
func (r *rig) workload(t *testing.T, ctx context.Context, name, claim string, opts ...podOpt) string {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	created, err := r.client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(created.UID)
}

// setPhase writes a Pod's phase through the status subresource, as kubelet would.
func (r *rig) setPhase(t *testing.T, ctx context.Context, ns, name string, phase corev1.PodPhase) {
	t.Helper()
	p, err := r.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = phase
	if _, err := r.client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) deletePod(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	err := r.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// attachments lists the MountpointS3PodAttachments.
func (r *rig) attachments(ctx context.Context) ([]s3api.MountpointS3PodAttachment, error) {
	list, err := r.s3pa.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]s3api.MountpointS3PodAttachment, len(list.Items))
	for i := range list.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// state is the cluster's sharing state: each workload UID's Mountpoint Pod and attachment, the live
// Mountpoint Pods, and any UID found more than once.
type state struct {
	attachments []s3api.MountpointS3PodAttachment
	mpOf        map[string]string // workload UID -> Mountpoint Pod
	s3paOf      map[string]string // workload UID -> attachment
	duplicates  []string
	mpPods      map[string]*corev1.Pod
}

func (r *rig) state(ctx context.Context) (*state, error) {
	as, err := r.attachments(ctx)
	if err != nil {
		return nil, err
	}
	s := &state{attachments: as, mpOf: map[string]string{}, s3paOf: map[string]string{}, mpPods: map[string]*corev1.Pod{}}
	for _, a := range as {
		for mp, ws := range a.Spec.MountpointS3PodAttachments {
			for _, w := range ws {
				if _, dup := s.mpOf[w.WorkloadPodUID]; dup {
					s.duplicates = append(s.duplicates, w.WorkloadPodUID)
				}
				s.mpOf[w.WorkloadPodUID], s.s3paOf[w.WorkloadPodUID] = mp, a.Name
			}
		}
	}
	pods, err := r.client.CoreV1().Pods(mpNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range pods.Items {
		s.mpPods[pods.Items[i].Name] = &pods.Items[i]
	}
	return s, nil
}

// converged reports whether exactly the given UIDs are attached, once each, each to an existing Mountpoint
// Pod, and every Mountpoint Pod not asked to unmount serves someone.
func (s *state) converged(uids []string) (bool, error) {
	if len(s.duplicates) > 0 {
		return false, fmt.Errorf("workloads in two places: %v", s.duplicates)
	}
	var attached []string
	for uid, mp := range s.mpOf {
		attached = append(attached, uid)
		if s.mpPods[mp] == nil {
			return false, fmt.Errorf("workload %s assigned to missing Mountpoint Pod %s", uid, mp)
		}
	}
	slices.Sort(attached)
	want := slices.Sorted(slices.Values(uids))
	if !slices.Equal(attached, want) {
		return false, fmt.Errorf("attached %v, want %v", attached, want)
	}
	for name, p := range s.mpPods {
		if p.Annotations[s3api.AnnotationNeedsUnmount] != "true" && !slices.Contains(values(s.mpOf), name) {
			return false, fmt.Errorf("Mountpoint Pod %s serves nobody and is not asked to unmount", name)
		}
	}
	return true, nil
}

func values(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func (r *rig) mpPod(ctx context.Context, name string) (*corev1.Pod, error) {
	return r.client.CoreV1().Pods(mpNamespace).Get(ctx, name, metav1.GetOptions{})
}
