package testutil

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	sharedtest "github.com/stowage-csi/stowage/shared/testutil"
)

// Env is the world an expand or modify handler test runs in: a fake clientset holding the test's objects, the
// fake driver, an Event recorder, and the PersistentVolume store behind the handler's lister.
type Env struct {
	Client *fake.Clientset
	CSI    *FakeCSI
	Events *record.FakeRecorder
	PVs    cache.Indexer
}

// NewEnv returns an Env over objs; a nil fakeCSI is a FakeCSI that answers every call.
func NewEnv(fakeCSI *FakeCSI, objs ...runtime.Object) *Env {
	if fakeCSI == nil {
		fakeCSI = &FakeCSI{}
	}
	return &Env{
		Client: sharedtest.NewClientset(objs...),
		CSI:    fakeCSI,
		Events: record.NewFakeRecorder(100),
		PVs:    cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
	}
}

// PVLister is the handler's PersistentVolume lister, over PVs.
func (e *Env) PVLister() corelisters.PersistentVolumeLister {
	return corelisters.NewPersistentVolumeLister(e.PVs)
}

// BeforeSync readies a sync of a claim already read: the stored PersistentVolumes copied into PVs, as an informer that has caught up
// would hold them, and the actions and Events so far emptied. It returns a context with the test's logger.
func (e *Env) BeforeSync(t *testing.T) context.Context {
	t.Helper()
	list, err := e.Client.CoreV1().PersistentVolumes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if err := e.PVs.Update(&list.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	e.Client.ClearActions()
	Events(e.Events)
	_, ctx := ktesting.NewTestContext(t)
	return ctx
}

// PVC is the stored claim name of Namespace.
func (e *Env) PVC(t *testing.T, name string) *v1.PersistentVolumeClaim {
	t.Helper()
	pvc, err := e.Client.CoreV1().PersistentVolumeClaims(Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get persistentvolumeclaim %s: %v", name, err)
	}
	return pvc
}

// PV is the stored PersistentVolume name.
func (e *Env) PV(t *testing.T, name string) *v1.PersistentVolume {
	t.Helper()
	pv, err := e.Client.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get persistentvolume %s: %v", name, err)
	}
	return pv
}
