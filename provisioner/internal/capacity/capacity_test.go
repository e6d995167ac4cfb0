package capacity

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
)

// fakeCapacity answers GetCapacity with bytes per zone.
type fakeCapacity struct {
	mu      sync.Mutex
	perZone map[string]int64
}

func (f *fakeCapacity) GetCapacity(_ context.Context, req *csi.GetCapacityRequest, _ ...grpc.CallOption) (*csi.GetCapacityResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &csi.GetCapacityResponse{AvailableCapacity: f.perZone[req.GetAccessibleTopology().GetSegments()["zone"]]}, nil
}

func indexer(objs ...runtime.Object) cache.Indexer {
	i := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range objs {
		_ = i.Add(o)
	}
	return i
}

func TestReconcile(t *testing.T) {
	late := testutil.Class("late", map[string]string{"type": "ssd"}, testutil.WaitForFirstConsumer)
	now := testutil.Class("now", nil)
	n1, cn1 := testutil.Node("n1", map[string]string{"zone": "a"}, "zone")
	n2, cn2 := testutil.Node("n2", map[string]string{"zone": "b"}, "zone")
	stale := &storagev1.CSIStorageCapacity{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "csisc-old", Labels: map[string]string{
			LabelDriverName: testutil.Driver, LabelManagedBy: managedByValue,
		}},
		StorageClassName: "deleted-class",
	}
	kube := fake.NewClientset(stale)
	// The fake clientset does not implement generateName.
	n := 0
	kube.PrependReactor("create", "csistoragecapacities", func(a k8stesting.Action) (bool, runtime.Object, error) {
		o := a.(k8stesting.CreateAction).GetObject().(*storagev1.CSIStorageCapacity)
		if o.Name == "" {
			n++
			o.Name = fmt.Sprintf("%s%d", o.GenerateName, n)
		}
		return false, nil, nil
	})
	drv := &fakeCapacity{perZone: map[string]int64{"a": 10 << 30, "b": 20 << 30}}
	owner := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "prov", UID: "rs-uid"}
	c, err := New(Config{Driver: testutil.Driver, Namespace: "kube-system", Owner: owner, HasTopology: true, Timeout: 1e9},
		kube, drv, storagelisters.NewStorageClassLister(indexer(late, now)),
		storagelisters.NewCSINodeLister(indexer(cn1, cn2)), corelisters.NewNodeLister(indexer(n1, n2)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Reconcile(ctx, 2); err != nil {
		t.Fatal(err)
	}
	list, err := kube.StorageV1().CSIStorageCapacities("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Fatalf("got %d objects, want 2 (late class x 2 zones; the immediate class and the stale object not)", len(list.Items))
	}
	for _, o := range list.Items {
		zone := o.NodeTopology.MatchLabels["zone"]
		if o.StorageClassName != "late" || o.Capacity.Value() != drv.perZone[zone] || o.OwnerReferences[0].UID != "rs-uid" {
			t.Errorf("object %+v", o)
		}
	}

	// Nothing changed: a second pass asks the driver again but writes nothing.
	kube.ClearActions()
	if err := c.Reconcile(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() != "list" {
			t.Errorf("unchanged capacity caused %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	// Capacity changes: one update.
	drv.perZone["a"] = 5 << 30
	kube.ClearActions()
	if err := c.Reconcile(ctx, 2); err != nil {
		t.Fatal(err)
	}
	updates := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "update" {
			updates++
		}
	}
	if updates != 1 {
		t.Errorf("%d updates, want 1", updates)
	}
}
