package handler

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	snaplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
	"github.com/stowage-csi/stowage/snapshotter/internal/sidecar/sidecartest"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const pollInterval = 7 * time.Second

// env is one handler over fake clientsets: kube holds Secrets, snap the content and classes.
type env struct {
	kube   *fake.Clientset
	snap   *snapfake.Clientset
	csi    *sidecartest.FakeCSI
	events *record.FakeRecorder
	h      *Handler
}

// setup builds the handler over content, classes and secrets; configure may change the handler's Config.
func setup(t *testing.T, csiFake *sidecartest.FakeCSI, content *snapv1.VolumeSnapshotContent, objs []runtime.Object, configure func(*Config)) *env {
	t.Helper()
	if csiFake == nil {
		csiFake = &sidecartest.FakeCSI{}
	}
	var kubeObjs, snapObjs []runtime.Object
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range objs {
		switch o := o.(type) {
		case *snapv1.VolumeSnapshotClass:
			_ = classes.Add(o)
			snapObjs = append(snapObjs, o)
		default:
			kubeObjs = append(kubeObjs, o)
		}
	}
	snapObjs = append(snapObjs, content)
	e := &env{kube: fake.NewClientset(kubeObjs...), snap: newSnapClientset(t, snapObjs...), csi: csiFake, events: record.NewFakeRecorder(10)}
	cfg := Config{
		Common: Common{Driver: sidecartest.Driver, Kube: e.kube, Client: e.snap, NamePrefix: "snapshot", NameUUIDLength: -1,
			Events: e.events, PollInterval: pollInterval, Now: func() time.Time { return testNow }},
		ClassLister: snaplisters.NewVolumeSnapshotClassLister(classes), CSI: csiFake, ListSnapshots: true,
	}
	if configure != nil {
		configure(&cfg)
	}
	e.h = New(cfg)
	return e
}

// newSnapClientset is the snapshot fake clientset with the API server's resourceVersion checks, holding objs.
func newSnapClientset(t *testing.T, objs ...runtime.Object) *snapfake.Clientset {
	t.Helper()
	//lint:ignore SA1019 the snapshot client module generates no apply configurations, so it has no NewClientset.
	snap := snapfake.NewSimpleClientset()
	if err := sharedtestutil.AddResourceVersions(&snap.Fake, snap.Tracker(), objs...); err != nil {
		t.Fatal(err)
	}
	return snap
}

// stored reads the content back with the resourceVersion the clientset gave it and forgets that read, so
// a test's request list starts with the handler's own.
func (e *env) stored(t *testing.T, name string) *snapv1.VolumeSnapshotContent {
	t.Helper()
	c := e.content(t, name)
	e.snap.ClearActions()
	return c
}

func (e *env) content(t *testing.T, name string) *snapv1.VolumeSnapshotContent {
	t.Helper()
	c, err := e.snap.SnapshotV1().VolumeSnapshotContents().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get volumesnapshotcontent %s: %v", name, err)
	}
	return c
}

// eventReasons drains the recorded Events into "Type Reason" strings (FakeRecorder formats "Type Reason
// Message").
// syncWant is what a test expects of one sync of a content: an error or none, the delay it asks before the
// next look, and the API requests and Events it makes.
type syncWant struct {
	err             bool
	again           time.Duration
	snap, kube, evs []string
}

// syncStored syncs the stored content name and checks the outcome against w.
func (e *env) syncStored(t *testing.T, name string, w syncWant) {
	t.Helper()
	again, err := e.h.Sync(testContext(t), e.stored(t, name))
	if (err != nil) != w.err {
		t.Fatalf("Sync error = %v, want error %v", err, w.err)
	}
	if again != w.again {
		t.Errorf("Sync asked to look again after %s, want %s", again, w.again)
	}
	wantStrings(t, "snapshot API requests", sidecartest.Actions(e.snap), w.snap)
	wantStrings(t, "core API requests", sidecartest.Actions(e.kube), w.kube)
	wantStrings(t, "events", e.eventReasons(), w.evs)
}

func (e *env) eventReasons() []string {
	var out []string
	for {
		select {
		case ev := <-e.events.Events:
			out = append(out, strings.Join(strings.SplitN(ev, " ", 3)[:2], " "))
		default:
			return out
		}
	}
}

func testContext(t *testing.T) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	return ctx
}

// content modifiers used by the tables
func withAnnotations(kv ...string) func(*snapv1.VolumeSnapshotContent) {
	return func(c *snapv1.VolumeSnapshotContent) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			c.Annotations[kv[i]] = kv[i+1]
		}
	}
}

var beingCreatedAnn = withAnnotations(snapapi.AnnBeingCreated, "yes")

func withStatus(handle string, ready bool) func(*snapv1.VolumeSnapshotContent) {
	return func(c *snapv1.VolumeSnapshotContent) {
		created := testNow.Add(-time.Hour).UnixNano()
		c.Status = &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, ReadyToUse: &ready, CreationTime: &created}
	}
}

// released marks a content as the snapshot controller does when its VolumeSnapshot is deleted.
func releasedBySC(c *snapv1.VolumeSnapshotContent) {
	ts := metav1.NewTime(testNow)
	c.DeletionTimestamp = &ts
	withAnnotations(snapapi.AnnBeingDeleted, "yes")(c)
}

func retain(c *snapv1.VolumeSnapshotContent) {
	c.Spec.DeletionPolicy = snapv1.VolumeSnapshotContentRetain
}

func preProvisioned(handle string) func(*snapv1.VolumeSnapshotContent) {
	return func(c *snapv1.VolumeSnapshotContent) {
		c.Spec.Source = snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle}
		c.Spec.VolumeSnapshotClassName = nil
	}
}

func secret(ns, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"user": []byte(name)}}
}

func wantStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %q\n want %q", what, got, want)
	}
}

func hasFinalizer(c *snapv1.VolumeSnapshotContent) bool {
	return slices.Contains(c.Finalizers, snapapi.ContentBoundFinalizer)
}

func ptr[T any](v T) *T { return &v }
