package expand

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/stowage-csi/stowage/resizer/internal/slow"
	"github.com/stowage-csi/stowage/resizer/internal/testutil"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
)

// env is one handler over a fake clientset; its PersistentVolume lister is refreshed from the clientset before
// every sync, as an informer that has caught up would be.
type env struct {
	client  *fake.Clientset
	csi     *testutil.FakeCSI
	events  *record.FakeRecorder
	pvs     cache.Indexer
	handler *Handler
}

type envOpts struct {
	trivial bool
	inUse   InUse
}

func newEnv(t *testing.T, o envOpts, fakeCSI *testutil.FakeCSI, objs ...runtime.Object) *env {
	t.Helper()
	if fakeCSI == nil {
		fakeCSI = &testutil.FakeCSI{}
	}
	e := &env{
		client: sharedtestutil.NewClientset(objs...),
		csi:    fakeCSI,
		events: record.NewFakeRecorder(100),
		pvs:    cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
	}
	var r Resizer = NewCSI(fakeCSI, e.client, false)
	if o.trivial {
		r = Trivial{}
	}
	e.handler = New(Config{
		Driver:           testutil.Driver,
		Client:           e.client,
		PVLister:         corelisters.NewPersistentVolumeLister(e.pvs),
		Resizer:          r,
		Events:           e.events,
		AnnotateFsResize: true,
		InUse:            o.inUse,
		Slow:             slow.New(testutil.RetryMax, func() time.Time { return testutil.Now }),
		Now:              func() time.Time { return testutil.Now },
	})
	return e
}

// sync runs the handler on the stored claim, with the actions list and Events emptied first.
func (e *env) sync(t *testing.T, name string) (time.Duration, error) {
	t.Helper()
	e.refreshPVs(t)
	pvc := e.pvc(t, name)
	e.client.ClearActions()
	testutil.Events(e.events)
	_, ctx := ktesting.NewTestContext(t)
	return e.handler.Sync(ctx, pvc)
}

// refreshPVs copies the stored PersistentVolumes into the handler's lister.
func (e *env) refreshPVs(t *testing.T) {
	t.Helper()
	list, err := e.client.CoreV1().PersistentVolumes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if err := e.pvs.Update(&list.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *env) pvc(t *testing.T, name string) *v1.PersistentVolumeClaim {
	t.Helper()
	pvc, err := e.client.CoreV1().PersistentVolumeClaims(testutil.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get persistentvolumeclaim %s: %v", name, err)
	}
	return pvc
}

func (e *env) pv(t *testing.T, name string) *v1.PersistentVolume {
	t.Helper()
	pv, err := e.client.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get persistentvolume %s: %v", name, err)
	}
	return pv
}

// resizeState sets status.allocatedResources and allocatedResourceStatuses for storage.
func resizeState(allocated string, state v1.ClaimResourceStatus) func(*v1.PersistentVolumeClaim) {
	return func(p *v1.PersistentVolumeClaim) {
		p.Status.AllocatedResources = v1.ResourceList{v1.ResourceStorage: mustQ(allocated)}
		p.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: state}
	}
}

type usedClaims map[string]bool

func (u usedClaims) Used(namespace, claim string) bool { return u[namespace+"/"+claim] }
