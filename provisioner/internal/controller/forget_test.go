package controller

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/stowage-csi/stowage/provisioner/internal/provision"
	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

// hooked is the real Provisioner with a hook that runs after the worker took its copy from the lister and before
// the Provisioner looks at it: the point where the informer may deliver the object's deletion.
type hooked struct {
	*provision.Provisioner
	beforeSync func()
}

func (h *hooked) SyncVolume(ctx context.Context, pv *v1.PersistentVolume) error {
	h.run()
	return h.Provisioner.SyncVolume(ctx, pv)
}

func (h *hooked) SyncClaim(ctx context.Context, c *v1.PersistentVolumeClaim) error {
	h.run()
	return h.Provisioner.SyncClaim(ctx, c)
}

func (h *hooked) run() {
	if f := h.beforeSync; f != nil {
		h.beforeSync = nil
		f()
	}
}

// raceRig is a Controller over unstarted informers whose caches the test fills and empties by hand, so it can
// replay informer deliveries in any order against the real Provisioner, a fake clientset that enforces
// resourceVersion preconditions, and a fake CSI driver.
type raceRig struct {
	c       *Controller
	s       *hooked
	kube    kubernetes.Interface
	csi     *testutil.FakeCSI
	pvs     cache.Indexer
	claims  cache.Indexer
	classes cache.Indexer
}

func newRaceRig(t *testing.T, objs ...runtime.Object) (*raceRig, *Controller) {
	t.Helper()
	kube := sharedtestutil.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(kube, 0)
	inf := Informers{
		Claims:      factory.Core().V1().PersistentVolumeClaims().Informer(),
		Volumes:     factory.Core().V1().PersistentVolumes().Informer(),
		Classes:     factory.Storage().V1().StorageClasses().Informer(),
		Attachments: factory.Storage().V1().VolumeAttachments().Informer(),
	}
	r := &raceRig{
		kube: kube, csi: testutil.NewFakeCSI(), pvs: inf.Volumes.GetIndexer(), claims: inf.Claims.GetIndexer(), classes: inf.Classes.GetIndexer(),
	}
	ctx := context.Background()
	for _, o := range objs {
		// The cached copy carries the resourceVersion the fake API server gave the object.
		switch o := o.(type) {
		case *v1.PersistentVolume:
			got, err := kube.CoreV1().PersistentVolumes().Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			must(t, r.pvs.Add(got))
		case *v1.PersistentVolumeClaim:
			got, err := kube.CoreV1().PersistentVolumeClaims(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			must(t, r.claims.Add(got))
		default:
			must(t, r.classes.Add(o))
		}
	}
	journal := provision.NewJournal(kube.CoordinationV1().Leases("kube-system"), provision.JournalConfig{Name: "intents"})
	jctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go journal.Run(jctx)
	p := provision.New(provision.Config{
		DriverName: testutil.Driver, Identity: "id-1", VolumeNamePrefix: "pvc", VolumeNameUUIDLength: -1, Timeout: 10 * time.Second,
	}, provision.Deps{
		Kube: kube, CSI: r.csi, Journal: journal,
		Claims:      factory.Core().V1().PersistentVolumeClaims().Lister(),
		Volumes:     factory.Core().V1().PersistentVolumes().Lister(),
		Classes:     factory.Storage().V1().StorageClasses().Lister(),
		Attachments: factory.Storage().V1().VolumeAttachments().Lister(),
	})
	r.s = &hooked{Provisioner: p}
	q := newQueues(t, time.Millisecond, time.Millisecond)
	c, err := New(Config{Workers: 1, CloneWorkers: 1, SlowRetry: time.Hour}, r.s, inf, q)
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	return r, c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// drain runs the queue's items on this goroutine, as one worker would, until it is empty.
func drain(t *testing.T, q workqueue.Queue[string], sync func(context.Context, string) error) {
	t.Helper()
	for q.Len() > 0 {
		key, _ := q.Get()
		if err := sync(context.Background(), key); err != nil {
			t.Errorf("sync %s: %v", key, err)
		}
		q.Forget(key)
		q.Done(key)
	}
}

func releasedPV() *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name: "pvc-1", UID: "pv-uid",
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": testutil.Driver},
			Finalizers:  []string{provision.VolumeFinalizer, "kubernetes.io/pv-protection"},
		},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
			StorageClassName:              "fast",
			PersistentVolumeSource:        v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: testutil.Driver, VolumeHandle: "vol-1"}},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeReleased},
	}
}

// A worker takes a PV's copy from the cache; before it acts on it, the informer delivers the PV's deletion (the
// cache drops it, the delete handler runs). The copy is stale: the volume was deleted and the finalizer removed
// by an earlier sync of the same key. Upstream's guard of kubernetes-csi/external-provisioner#1235 must still
// hold: the delete handler must not wipe the record a worker is about to consult.
func TestStaleVolumeCopyAfterDeleteEventDeletesOnce(t *testing.T) {
	pv := releasedPV()
	r, c := newRaceRig(t, pv)
	r.csi.Put("pvc-1")
	ctx := context.Background()

	// First sync: Delete the PV object, DeleteVolume, drop the finalizer. The fake API server removes the object
	// at once; the cache still holds the Released copy (its events are not delivered yet).
	must(t, c.syncVolume(ctx, pv.Name))
	if n := len(r.csi.Deletes); n != 1 {
		t.Fatalf("first sync: DeleteVolume called %d times, want 1", n)
	}
	stale, _, err := r.pvs.GetByKey(pv.Name)
	if err != nil || stale == nil {
		t.Fatalf("cache lost the PV: %v", err)
	}
	// The key is queued again (an update event of our own writes) and a worker takes the stale copy; then the
	// informer delivers the deletion: cache first, handlers after.
	r.s.beforeSync = func() {
		must(t, r.pvs.Delete(stale))
		c.volumeDeleted(stale)
	}
	must(t, c.syncVolume(ctx, pv.Name))
	// Whatever the delete handler queued runs too.
	drain(t, c.volumeQ, c.syncVolume)

	if n := len(r.csi.Deletes); n != 1 {
		t.Errorf("DeleteVolume called %d times for one PV, want 1", n)
	}
}

// The same race on the claim queue: a claim deleted during provisioning is cleaned up (CreateVolume to find the
// volume, DeleteVolume, release of the intent); a stale copy that still shows the intent, synced while the
// claim's deletion is delivered, must not repeat the clean-up (which would make the volume again and delete it
// again).
func TestStaleClaimCopyAfterDeleteEventCleansUpOnce(t *testing.T) {
	now := metav1.Now()
	claim := testutil.Claim("ns", "data", "claim-uid", "fast", "1Gi", func(c *v1.PersistentVolumeClaim) {
		c.DeletionTimestamp = &now
		c.Finalizers = append(c.Finalizers, provision.IntentKey)
		c.Annotations[provision.IntentKey] = "pvc-claim-uid"
	})
	r, c := newRaceRig(t, claim, testutil.Class("fast", nil))
	ctx := context.Background()
	key := "ns/data"

	must(t, c.syncClaim(ctx, key))
	if n := len(r.csi.Deletes); n != 1 {
		t.Fatalf("first sync: DeleteVolume called %d times, want 1", n)
	}
	stale, _, err := r.claims.GetByKey(key)
	if err != nil || stale == nil {
		t.Fatalf("cache lost the claim: %v", err)
	}
	// The PVC protection controller lets the claim go once the intent is released.
	must(t, r.kube.CoreV1().PersistentVolumeClaims("ns").Delete(ctx, "data", metav1.DeleteOptions{}))
	r.s.beforeSync = func() {
		must(t, r.claims.Delete(stale))
		c.claimDeleted(stale)
	}
	must(t, c.syncClaim(ctx, key))
	drain(t, c.claimQ, c.syncClaim)

	if n := len(r.csi.Deletes); n != 1 {
		t.Errorf("DeleteVolume called %d times for one deleted claim, want 1", n)
	}
	if n := len(r.csi.Creates); n != 1 {
		t.Errorf("CreateVolume called %d times for one deleted claim, want 1", n)
	}
}
