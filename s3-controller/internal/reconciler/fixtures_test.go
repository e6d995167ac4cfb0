package reconciler

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stowage-csi/stowage/s3-controller/internal/config"
	"github.com/stowage-csi/stowage/shared/s3api"
)

const (
	testNS      = "mount-s3"
	testVersion = "v-test"
	testNode    = "node-1"
)

var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testConfig() config.MountpointPod {
	return config.MountpointPod{
		Namespace: testNS, MountpointVersion: "1.23.0", PriorityClassName: config.DefaultPriorityClassName,
		Image: "example/mounter:1", ImagePullPolicy: corev1.PullIfNotPresent, Command: config.DefaultCommand,
		CSIDriverVersion: testVersion,
	}
}

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := s3api.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// env is a reconciler on a fake client that has the cache's field indexes.
type env struct {
	t      *testing.T
	c      client.Client
	r      *Reconciler
	events *events.FakeRecorder
	now    time.Time
}

func newEnv(t *testing.T, objs ...client.Object) *env {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&corev1.Pod{}, &s3api.MountpointS3PodAttachment{})
	for _, ix := range IndexFuncs() {
		b = b.WithIndex(ix.Object, ix.Field, ix.Func)
	}
	e := &env{t: t, c: b.Build(), events: events.NewFakeRecorder(100), now: testNow}
	e.r = e.reconciler(e.c, e.c)
	return e
}

func (e *env) reconciler(c client.Client, reader client.Reader) *Reconciler {
	return New(Options{Client: c, Reader: reader, Config: testConfig(), Events: e.events, Now: func() time.Time { return e.now }})
}

// volumeObjs returns a bound PV of the S3 driver and its claim.
func volumeObjs(name string, mountOptions []string, mutate ...func(*corev1.PersistentVolume, *corev1.PersistentVolumeClaim)) []client.Object {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:  []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			MountOptions: mountOptions,
			ClaimRef:     &corev1.ObjectReference{Namespace: "default", Name: name + "-claim"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: s3api.DriverName, VolumeHandle: name + "-handle",
				VolumeAttributes: map[string]string{"bucketName": "bucket"},
			}},
		},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-claim"},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: name, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	for _, m := range mutate {
		m(pv, pvc)
	}
	return []client.Object{pv, pvc}
}

type podOpt func(*corev1.Pod)

func withFSGroup(g int64) podOpt {
	return func(p *corev1.Pod) { p.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: &g} }
}
func readOnlyClaim(p *corev1.Pod) { p.Spec.Volumes[0].PersistentVolumeClaim.ReadOnly = true }
func withPhase(ph corev1.PodPhase) podOpt {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}
func withSA(sa string) podOpt { return func(p *corev1.Pod) { p.Spec.ServiceAccountName = sa } }

// workload is a scheduled, Pending Pod using the claim of PV pvName.
func workload(name, pvName string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{
			NodeName:   testNode,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvName + "-claim"},
			}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func (e *env) reconcile(p *corev1.Pod) error {
	e.t.Helper()
	_, err := e.r.Reconcile(context.Background(), Request{NamespacedName: client.ObjectKeyFromObject(p), UID: p.UID})
	return err
}

func (e *env) mustReconcile(pods ...*corev1.Pod) {
	e.t.Helper()
	for _, p := range pods {
		if err := e.reconcile(p); err != nil {
			e.t.Fatalf("reconcile %s: %v", p.Name, err)
		}
	}
}

func (e *env) attachments() []s3api.MountpointS3PodAttachment {
	e.t.Helper()
	l := &s3api.MountpointS3PodAttachmentList{}
	if err := e.c.List(context.Background(), l); err != nil {
		e.t.Fatal(err)
	}
	return l.Items
}

func (e *env) mountpointPods() []corev1.Pod {
	e.t.Helper()
	l := &corev1.PodList{}
	if err := e.c.List(context.Background(), l, client.InNamespace(testNS)); err != nil {
		e.t.Fatal(err)
	}
	return l.Items
}

func (e *env) pod(ns, name string) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{}
	err := e.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// setPhase writes a Pod's phase through the status subresource, as kubelet would.
func (e *env) setPhase(p *corev1.Pod, ph corev1.PodPhase) {
	e.t.Helper()
	cur := e.pod(p.Namespace, p.Name)
	cur.Status.Phase = ph
	if err := e.c.Status().Update(context.Background(), cur); err != nil {
		e.t.Fatal(err)
	}
}

// uidsByMountpointPod flattens the attachments into mountpoint pod -> sorted workload UIDs.
func uidsByMountpointPod(as []s3api.MountpointS3PodAttachment) map[string][]string {
	out := map[string][]string{}
	for _, a := range as {
		for mp, ws := range a.Spec.MountpointS3PodAttachments {
			for _, w := range ws {
				out[mp] = append(out[mp], w.WorkloadPodUID)
			}
			slices.Sort(out[mp])
		}
	}
	return out
}

// lagging hides the named attachments from List and Get, as an informer cache that has not seen them yet.
type lagging struct {
	client.Client
	hidden map[string]bool
}

func (l *lagging) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := l.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if as, ok := list.(*s3api.MountpointS3PodAttachmentList); ok {
		as.Items = slices.DeleteFunc(as.Items, func(a s3api.MountpointS3PodAttachment) bool { return l.hidden[a.Name] })
	}
	return nil
}

func (l *lagging) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*s3api.MountpointS3PodAttachment); ok && l.hidden[key.Name] {
		return apierrors.NewNotFound(s3api.GroupVersionResource().GroupResource(), key.Name)
	}
	return l.Client.Get(ctx, key, obj, opts...)
}
