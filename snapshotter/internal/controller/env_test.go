package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/stowage-csi/stowage/shared/testutil"
	"github.com/stowage-csi/stowage/shared/workqueue"
	"github.com/stowage-csi/stowage/snapshotter/internal/controller/opmetrics"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

const (
	driver = "csi.example.com"
	ns     = "default"
)

// env is a controller over fake clientsets with the API server's resourceVersion checks, its informers synced
// to the seed objects and the clients' action logs cleared, so a test sees only the requests of one sync.
type env struct {
	t       *testing.T
	ctrl    *Controller
	kube    *kubefake.Clientset
	snap    *snapfake.Clientset
	events  *record.FakeRecorder
	metrics *opmetrics.Manager

	mu        sync.Mutex
	recording bool
	log       []k8stesting.Action
}

func newEnv(t *testing.T, objs ...runtime.Object) *env {
	t.Helper()
	var kubeObjs, snapObjs []runtime.Object
	for _, o := range objs {
		switch o.(type) {
		case *v1.PersistentVolumeClaim, *v1.PersistentVolume:
			kubeObjs = append(kubeObjs, o)
		default:
			snapObjs = append(snapObjs, o)
		}
	}
	//lint:ignore SA1019 the snapshot client module generates no NewClientset (it has no apply configurations)
	e := &env{t: t, kube: testutil.NewClientset(kubeObjs...), snap: snapfake.NewSimpleClientset(), events: record.NewFakeRecorder(100)}
	if err := testutil.AddResourceVersions(&e.snap.Fake, e.snap.Tracker(), snapObjs...); err != nil {
		t.Fatal(err)
	}
	e.kube.PrependReactor("*", "*", e.record)
	e.snap.PrependReactor("*", "*", e.record)
	var err error
	if e.metrics, err = opmetrics.New(); err != nil {
		t.Fatal(err)
	}
	queues, err := workqueue.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	qcfg := func(name string) workqueue.Config {
		return workqueue.Config{Name: name, RetryIntervalStart: time.Millisecond, RetryIntervalMax: time.Second}
	}
	sq, err := workqueue.New[string](queues, qcfg(SnapshotQueueName))
	if err != nil {
		t.Fatal(err)
	}
	cq, err := workqueue.New[string](queues, qcfg(ContentQueueName))
	if err != nil {
		t.Fatal(err)
	}
	gsq, err := workqueue.New[string](queues, qcfg(GroupSnapshotQueueName))
	if err != nil {
		t.Fatal(err)
	}
	gcq, err := workqueue.New[string](queues, qcfg(GroupContentQueueName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.ShutDown(); cq.ShutDown(); gsq.ShutDown(); gcq.ShutDown() })
	sf := snapinformers.NewSharedInformerFactory(e.snap, 0)
	kf := informers.NewSharedInformerFactory(e.kube, 0)
	e.ctrl, err = New(Config{
		Snap: e.snap, Kube: e.kube,
		Snapshots: sf.Snapshot().V1().VolumeSnapshots(), Contents: sf.Snapshot().V1().VolumeSnapshotContents(),
		Classes: sf.Snapshot().V1().VolumeSnapshotClasses(), Claims: kf.Core().V1().PersistentVolumeClaims(),
		SnapshotQueue: sq, ContentQueue: cq, Events: e.events, Metrics: e.metrics, Workers: 1,
		PreventVolumeModeConversion: true,
		Groups: &GroupConfig{
			Snapshots: sf.Groupsnapshot().V1().VolumeGroupSnapshots(), Contents: sf.Groupsnapshot().V1().VolumeGroupSnapshotContents(),
			Classes: sf.Groupsnapshot().V1().VolumeGroupSnapshotClasses(), SnapshotQueue: gsq, ContentQueue: gcq,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sf.Start(ctx.Done())
	kf.Start(ctx.Done())
	t.Cleanup(func() { cancel(); sf.Shutdown(); kf.Shutdown() })
	if !cache.WaitForCacheSync(ctx.Done(), e.ctrl.synced...) {
		t.Fatal("caches did not sync")
	}
	e.mu.Lock()
	e.recording = true
	e.mu.Unlock()
	return e
}

// record is a reactor that logs every request of either client in the order they are made.
func (e *env) record(a k8stesting.Action) (bool, runtime.Object, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.recording && a.GetVerb() != "list" && a.GetVerb() != "watch" {
		e.log = append(e.log, a.DeepCopy())
	}
	return false, nil, nil
}

func (e *env) requests() []k8stesting.Action {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.log)
}

// actions lists the API requests of both clients in order, informer list/watch left out, as "verb resource[/sub] name".
func (e *env) actions() []string {
	var out []string
	for _, a := range e.requests() {
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		name := ""
		if named, ok := a.(interface{ GetName() string }); ok {
			name = named.GetName()
		} else if created, ok := a.(k8stesting.CreateAction); ok {
			if m, err := metaName(created.GetObject()); err == nil {
				name = m
			}
		}
		out = append(out, a.GetVerb()+" "+res+" "+name)
	}
	return out
}

// patchBody returns the body of the n-th patch (0-based) to resource, decoded.
func (e *env) patchBody(resource string, n int) map[string]any {
	e.t.Helper()
	for _, a := range e.requests() {
		p, ok := a.(k8stesting.PatchAction)
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		if !ok || res != resource {
			continue
		}
		if n > 0 {
			n--
			continue
		}
		var body map[string]any
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			e.t.Fatal(err)
		}
		return body
	}
	e.t.Fatalf("no patch %d of %s in %v", n, resource, e.actions())
	return nil
}

// eventList drains the recorded Events as "Type Reason".
func (e *env) eventList() []string {
	var out []string
	for {
		select {
		case ev := <-e.events.Events:
			f := strings.SplitN(ev, " ", 3)
			out = append(out, f[0]+" "+f[1])
		default:
			return out
		}
	}
}

func (e *env) snapshot(name string) *snapv1.VolumeSnapshot {
	e.t.Helper()
	vs, err := e.snap.SnapshotV1().VolumeSnapshots(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return vs
}

func (e *env) content(name string) *snapv1.VolumeSnapshotContent {
	e.t.Helper()
	c, err := e.snap.SnapshotV1().VolumeSnapshotContents().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func metaName(o runtime.Object) (string, error) {
	if m, ok := o.(metav1.Object); ok {
		return m.GetName(), nil
	}
	return "", fmt.Errorf("%T has no metadata", o)
}

// Builders.

func claim(name, pv string, opts ...func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec:       v1.PersistentVolumeClaimSpec{VolumeName: pv},
		Status:     v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound},
	}
	for _, o := range opts {
		o(pvc)
	}
	return pvc
}

func volume(name, claimName, handle string) *v1.PersistentVolume {
	block := v1.PersistentVolumeFilesystem
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}},
			ClaimRef:               &v1.ObjectReference{Namespace: ns, Name: claimName, UID: types.UID("uid-" + claimName)},
			VolumeMode:             &block,
		},
	}
}

func class(name string, policy snapv1.DeletionPolicy, opts ...func(*snapv1.VolumeSnapshotClass)) *snapv1.VolumeSnapshotClass {
	c := &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: driver, DeletionPolicy: policy}
	for _, o := range opts {
		o(c)
	}
	return c
}

func isDefault(c *snapv1.VolumeSnapshotClass) {
	c.Annotations = map[string]string{snapapi.AnnDefaultClass: "true"}
}

func snapshotOf(name, pvc string, opts ...func(*snapv1.VolumeSnapshot)) *snapv1.VolumeSnapshot {
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &pvc}},
	}
	for _, o := range opts {
		o(vs)
	}
	return vs
}

func withClass(name string) func(*snapv1.VolumeSnapshot) {
	return func(vs *snapv1.VolumeSnapshot) { vs.Spec.VolumeSnapshotClassName = &name }
}

func withFinalizers(f ...string) func(*snapv1.VolumeSnapshot) {
	return func(vs *snapv1.VolumeSnapshot) { vs.Finalizers = f }
}

func deleting(vs *snapv1.VolumeSnapshot) {
	now := metav1.Now()
	vs.DeletionTimestamp = &now
}

func boundTo(content string, ready bool) func(*snapv1.VolumeSnapshot) {
	return func(vs *snapv1.VolumeSnapshot) {
		vs.Status = &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &content, ReadyToUse: &ready}
	}
}

// dynContent is the content the controller creates for snapshotOf(snap, ...).
func dynContent(snap, handle string, policy snapv1.DeletionPolicy, opts ...func(*snapv1.VolumeSnapshotContent)) *snapv1.VolumeSnapshotContent {
	c := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: "snapcontent-uid-" + snap, Finalizers: []string{snapapi.ContentBoundFinalizer}},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: v1.ObjectReference{Namespace: ns, Name: snap, UID: types.UID("uid-" + snap)},
			Source:            snapv1.VolumeSnapshotContentSource{VolumeHandle: &handle},
			DeletionPolicy:    policy,
			Driver:            driver,
		},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func readyStatus(size, created int64) func(*snapv1.VolumeSnapshotContent) {
	return func(c *snapv1.VolumeSnapshotContent) {
		ready, handle := true, "snap-1"
		c.Status = &snapv1.VolumeSnapshotContentStatus{ReadyToUse: &ready, RestoreSize: &size, CreationTime: &created, SnapshotHandle: &handle}
	}
}

func resourceQuantity(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.BinarySI) }
