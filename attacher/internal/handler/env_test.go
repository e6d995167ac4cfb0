package handler

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/stowage-csi/stowage/attacher/internal/testutil"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
)

var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// env is one handler over a fake clientset and listers that hold the same objects.
type env struct {
	client *fake.Clientset
	csi    *testutil.FakeCSI
	cfg    Config
}

func newEnv(driver string, caps Capabilities, csiFake *testutil.FakeCSI, objs ...runtime.Object) *env {
	if driver == "" {
		driver = testutil.Driver
	}
	if csiFake == nil {
		csiFake = &testutil.FakeCSI{}
	}
	client := sharedtestutil.NewClientset(objs...)
	anys := make([]any, len(objs))
	for i, o := range objs {
		anys[i] = o
	}
	pvs, nodes, vas := testutil.Listers(anys...)
	return &env{client: client, csi: csiFake, cfg: Config{
		Driver: driver, Client: client, PVLister: pvs, CSINodeLister: nodes, VALister: vas,
		CSI: csiFake, Capabilities: caps, DefaultFSType: "ext4", Now: func() time.Time { return testNow },
	}}
}

func (e *env) va(t *testing.T, name string) *storagev1.VolumeAttachment {
	t.Helper()
	va, err := e.client.StorageV1().VolumeAttachments().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get volumeattachment %s: %v", name, err)
	}
	return va
}

func (e *env) pv(t *testing.T, name string) *v1.PersistentVolume {
	t.Helper()
	pv, err := e.client.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get persistentvolume %s: %v", name, err)
	}
	return pv
}

// stored reads name back from the clientset (with the resourceVersion the clientset gave it) and forgets
// that read, so a test's action list starts with the handler's own requests.
func (e *env) stored(t *testing.T, name string) *storagev1.VolumeAttachment {
	t.Helper()
	va := e.va(t, name)
	e.client.ClearActions()
	return va
}

func testContext(t *testing.T) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	return ctx
}

// object modifiers used by the tables
func withFinalizer(va *storagev1.VolumeAttachment) {
	va.Finalizers = append(va.Finalizers, FinalizerName(va.Spec.Attacher))
}

func withAnnotations(kv ...string) func(*storagev1.VolumeAttachment) {
	return func(va *storagev1.VolumeAttachment) {
		if va.Annotations == nil {
			va.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			va.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func attached(va *storagev1.VolumeAttachment) { va.Status.Attached = true }

func deleting(va *storagev1.VolumeAttachment) {
	ts := metav1.NewTime(testNow)
	va.DeletionTimestamp = &ts
}

func ptr[T any](v T) *T { return &v }
