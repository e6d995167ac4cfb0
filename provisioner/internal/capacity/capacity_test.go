package capacity

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
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

// rig is a Controller over a fake clientset, with the late class in zones a and b (nodes n1, n2) and the
// immediate class "now".
type rig struct {
	c    *Controller
	kube *fake.Clientset
	drv  *fakeCapacity
}

func newRig(t *testing.T, cfg Config, objs ...runtime.Object) *rig {
	t.Helper()
	late := testutil.Class("late", map[string]string{"type": "ssd"}, testutil.WaitForFirstConsumer)
	other := testutil.Class("other", nil, testutil.WaitForFirstConsumer)
	now := testutil.Class("now", nil)
	n1, cn1 := testutil.Node("n1", map[string]string{"zone": "a"}, "zone")
	n2, cn2 := testutil.Node("n2", map[string]string{"zone": "b"}, "zone")
	kube := fake.NewClientset(objs...)
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
	cfg.Driver, cfg.Namespace, cfg.Timeout = testutil.Driver, "kube-system", 1e9
	c, err := New(cfg, kube, drv, storagelisters.NewStorageClassLister(indexer(late, other, now)),
		storagelisters.NewCSINodeLister(indexer(cn1, cn2)), corelisters.NewNodeLister(indexer(n1, n2)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{c: c, kube: kube, drv: drv}
}

// published maps "class zone" to the capacity published for it, in GiB.
func (r *rig) published(t *testing.T) map[string]int64 {
	t.Helper()
	list, err := r.kube.StorageV1().CSIStorageCapacities("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, o := range list.Items {
		zone := ""
		if o.NodeTopology != nil {
			zone = o.NodeTopology.MatchLabels["zone"]
		}
		out[o.StorageClassName+" "+zone] = o.Capacity.Value() >> 30
	}
	return out
}

func (r *rig) setZone(zone string, bytes int64) {
	r.drv.mu.Lock()
	r.drv.perZone[zone] = bytes
	r.drv.mu.Unlock()
}

func TestReconcile(t *testing.T) {
	stale := &storagev1.CSIStorageCapacity{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "csisc-old", Labels: map[string]string{
			LabelDriverName: testutil.Driver, LabelManagedBy: managedByValue,
		}},
		StorageClassName: "deleted-class",
	}
	owner := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "prov", UID: "rs-uid"}
	r := newRig(t, Config{Owner: owner, HasTopology: true}, stale)
	c, kube, drv := r.c, r.kube, r.drv
	ctx := context.Background()
	if err := c.Reconcile(ctx, 2); err != nil {
		t.Fatal(err)
	}
	list, err := kube.StorageV1().CSIStorageCapacities("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 4 {
		t.Fatalf("got %d objects, want 4 (two late classes x 2 zones; the immediate class and the stale object not)", len(list.Items))
	}
	for _, o := range list.Items {
		zone := o.NodeTopology.MatchLabels["zone"]
		if o.StorageClassName == "now" || o.Capacity.Value() != drv.perZone[zone] || o.OwnerReferences[0].UID != "rs-uid" {
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
	// Capacity changes in one zone: one update per class.
	r.setZone("a", 5<<30)
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
	if updates != 2 {
		t.Errorf("%d updates, want 2", updates)
	}
}

// After CreateVolume or DeleteVolume, upstream refreshes at once the objects the volume may have changed,
// instead of leaving the scheduler with stale capacity until the next poll: with node affinity, every class in
// the volume's segments; without, its class in every segment. Nothing else is asked or written.
func TestRefreshAfterVolumeChange(t *testing.T) {
	zoneA := &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"a"}}},
	}}}}
	for _, tc := range []struct {
		name     string
		class    string
		affinity *v1.VolumeNodeAffinity
		want     map[string]int64
	}{
		{name: "volume in zone a: every class there", class: "late", affinity: zoneA,
			want: map[string]int64{"late a": 1, "other a": 1, "late b": 20, "other b": 20}},
		{name: "volume without topology: its class everywhere", class: "other",
			want: map[string]int64{"late a": 10, "other a": 1, "late b": 20, "other b": 2}},
		{name: "affinity that names no segment: its class", class: "late", affinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n1"}}}}},
		}}, want: map[string]int64{"late a": 1, "other a": 10, "late b": 2, "other b": 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{HasTopology: true})
			ctx := context.Background()
			if err := r.c.Reconcile(ctx, 1); err != nil {
				t.Fatal(err)
			}
			r.setZone("a", 1<<30)
			r.setZone("b", 2<<30)
			r.c.Refresh(tc.class, tc.affinity)
			if err := r.c.refreshTargets(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if got := r.published(t); !maps.Equal(got, tc.want) {
				t.Errorf("published %v, want %v", got, tc.want)
			}
			// The targets were taken: a second pass refreshes nothing more.
			r.setZone("a", 3<<30)
			r.kube.ClearActions()
			if err := r.c.refreshTargets(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if n := len(r.kube.Actions()); n != 0 {
				t.Errorf("a pass with nothing to refresh made %d requests", n)
			}
		})
	}
}

// Run refreshes between polls: with an hour's poll interval, a Refresh alone updates the object.
func TestRunRefreshesBeforeThePoll(t *testing.T) {
	r := newRig(t, Config{HasTopology: true, PollInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.c.Run(ctx, 1); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	sharedtestutil.Eventually(t, 10*time.Second, "the first pass", func() (bool, error) {
		return r.published(t)["late a"] == 10, nil
	})
	r.setZone("a", 7<<30)
	r.c.Refresh("late", nil)
	sharedtestutil.Eventually(t, 10*time.Second, "the refreshed object", func() (bool, error) {
		return r.published(t)["late a"] == 7, nil
	})
}

// Under --node-deployment a provisioner publishes its own node's segment only, under a managed-by label value
// that stays a valid label value whatever the node's name, the same one upstream's computes.
func TestNodeDeploymentPublishesItsSegment(t *testing.T) {
	long := strings.Repeat("n", 60) + ".example.com"
	r := newRig(t, Config{HasTopology: true, NodeName: long, NodeSegment: map[string]string{"zone": "b"}})
	if err := r.c.Reconcile(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if got, want := r.published(t), map[string]int64{"late b": 20, "other b": 20}; !maps.Equal(got, want) {
		t.Errorf("published %v, want %v", got, want)
	}
	list, err := r.kube.StorageV1().CSIStorageCapacities("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range list.Items {
		if v := o.Labels[LabelManagedBy]; v != ManagedBy(long) || len(validation.IsValidLabelValue(v)) > 0 {
			t.Errorf("managed-by %q: %v", v, validation.IsValidLabelValue(v))
		}
	}
}

// ManagedBy shortens as upstream's getNameWithMaxLength does; the expected values are upstream's for the same
// node names.
func TestManagedBy(t *testing.T) {
	for _, tc := range []struct{ node, want string }{
		{"node-1", "external-provisioner-node-1"},
		{strings.Repeat("a", 42), "external-provisioner-" + strings.Repeat("a", 42)},
		{strings.Repeat("a", 43), "external-p-" + fnvHex("external-provisioner") + "-" + strings.Repeat("a", 43)},
		{strings.Repeat("a", 53), "external-provisioner-" + fnvHex("external-provisioner-"+strings.Repeat("a", 53))},
		{strings.Repeat("b", 253), "external-provisioner-" + fnvHex("external-provisioner-"+strings.Repeat("b", 253))},
	} {
		got := ManagedBy(tc.node)
		if got != tc.want || len(validation.IsValidLabelValue(got)) > 0 {
			t.Errorf("ManagedBy(%d chars) = %q (%d chars), want %q", len(tc.node), got, len(got), tc.want)
		}
	}
	// FNV-1a of the empty string and of "a", known values, so the hash is the one upstream uses.
	if fnvHex("") != "811c9dc5" || fnvHex("a") != "e40c292c" {
		t.Errorf("fnvHex: %s %s", fnvHex(""), fnvHex("a"))
	}
}
