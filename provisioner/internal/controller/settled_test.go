package controller

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
)

// Claims and PVs of ours that the Syncer reports settled are not queued on add or update; the others are, and
// a deleted one always is (its worker forgets it).
func TestSettledNotQueued(t *testing.T) {
	r := newRecorder()
	r.settled = map[string]bool{"settled": true}
	factory := informers.NewSharedInformerFactory(sharedtestutil.NewClientset(), 0)
	q := newQueues(t, time.Millisecond, time.Second)
	c, err := New(Config{Workers: 1, CloneWorkers: 1}, r, Informers{
		Claims:  factory.Core().V1().PersistentVolumeClaims().Informer(),
		Volumes: factory.Core().V1().PersistentVolumes().Informer(),
		Classes: factory.Storage().V1().StorageClasses().Informer(),
	}, q)
	if err != nil {
		t.Fatal(err)
	}
	pv := func(name string) *v1.PersistentVolume {
		return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: testutil.Driver}}}}
	}
	settledClaim, settledPV := testutil.Claim("ns", "settled", "u1", "fast", "1Gi"), pv("settled")
	c.claimChanged(settledClaim)
	c.volumeChanged(settledPV)
	if n, m := q.Claims.Len(), q.Volumes.Len(); n != 0 || m != 0 {
		t.Fatalf("settled claim and PV: %d claims and %d PVs queued, want none", n, m)
	}
	c.claimChanged(testutil.Claim("ns", "other", "u2", "fast", "1Gi"))
	c.volumeChanged(pv("other"))
	c.claimDeleted(settledClaim)
	c.volumeDeleted(settledPV)
	if n, m := q.Claims.Len(), q.Volumes.Len(); n != 2 || m != 2 {
		t.Fatalf("unsettled and deleted: %d claims and %d PVs queued, want 2 each", n, m)
	}
}
