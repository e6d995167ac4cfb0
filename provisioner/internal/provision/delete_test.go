package provision

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
)

func releasedPV(opts ...func(*v1.PersistentVolume)) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name: volName, UID: "pv-uid",
			Annotations: map[string]string{annProvisionedBy: testutil.Driver},
			Finalizers:  []string{"kubernetes.io/pv-protection", VolumeFinalizer},
		},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
			StorageClassName:              "fast",
			PersistentVolumeSource:        v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: testutil.Driver, VolumeHandle: "vol-0001"}},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeReleased},
	}
	for _, o := range opts {
		o(pv)
	}
	return pv
}

func TestSyncVolume(t *testing.T) {
	tests := []struct {
		name        string
		pv          *v1.PersistentVolume
		objs        []runtime.Object
		setup       func(*harness)
		wantAct     []string
		wantDeletes int
		wantErr     bool
		wantFinal   bool // our finalizer still on the PV (if the PV is still there)
		wantEvent   string
		wantSecret  string // DeleteVolume's secrets["key"]
	}{
		{
			name:        "released with Delete: DeleteVolume, delete PV, drop finalizer",
			pv:          releasedPV(),
			wantAct:     []string{"delete persistentvolumes", "patch persistentvolumes"},
			wantDeletes: 1,
		},
		{
			name: "deletion secret read from the PV annotations",
			pv: releasedPV(func(pv *v1.PersistentVolume) {
				pv.Annotations[annDeletionSecretName] = "s"
				pv.Annotations[annDeletionSecretNS] = "ns"
			}),
			objs:        []runtime.Object{&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}},
			wantAct:     []string{"get secrets", "delete persistentvolumes", "patch persistentvolumes"},
			wantDeletes: 1,
		},
		{
			// The secret went (with its namespace, say): the deletion goes on without it, as upstream's.
			name: "deletion secret gone: DeleteVolume without it",
			pv: releasedPV(func(pv *v1.PersistentVolume) {
				pv.Annotations[annDeletionSecretName] = "gone"
				pv.Annotations[annDeletionSecretNS] = "ns"
			}),
			wantAct:     []string{"get secrets", "delete persistentvolumes", "patch persistentvolumes"},
			wantDeletes: 1,
		},
		{
			// A PV without the annotations: the class's provisioner secret, resolved for this PV's claim.
			name: "no deletion-secret annotations: the StorageClass's secret",
			pv: releasedPV(func(pv *v1.PersistentVolume) {
				pv.Spec.ClaimRef = &v1.ObjectReference{Namespace: "team", Name: "data"}
			}),
			objs: []runtime.Object{
				&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: testutil.Driver, Parameters: map[string]string{
					"csi.storage.k8s.io/provisioner-secret-name":      "creds-${pvc.name}",
					"csi.storage.k8s.io/provisioner-secret-namespace": "${pvc.namespace}",
				}},
				&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "creds-data"}, Data: map[string][]byte{"key": []byte("v")}},
			},
			wantAct:     []string{"get secrets", "delete persistentvolumes", "patch persistentvolumes"},
			wantDeletes: 1, wantSecret: "v",
		},
		{
			name: "still attached: no DeleteVolume",
			pv:   releasedPV(),
			objs: []runtime.Object{&storagev1.VolumeAttachment{
				ObjectMeta: metav1.ObjectMeta{Name: "va"},
				Spec:       storagev1.VolumeAttachmentSpec{Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &volName}},
			}},
			wantErr: true, wantFinal: true,
		},
		{
			name:      "bound PV: nothing",
			pv:        releasedPV(func(pv *v1.PersistentVolume) { pv.Status.Phase = v1.VolumeBound }),
			wantFinal: true,
		},
		{
			name: "Retain policy, PV deleted by the user: only the finalizer goes",
			pv: releasedPV(func(pv *v1.PersistentVolume) {
				pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
				now := metav1.Now()
				pv.DeletionTimestamp = &now
			}),
			wantAct: []string{"patch persistentvolumes"},
		},
		{
			// As upstream: the PV stays Released and is not deleted, so patching it to Retain rescues it.
			name:        "DeleteVolume fails: Event, PV untouched",
			pv:          releasedPV(),
			setup:       func(h *harness) { h.csi.DeleteErr = testutil.Code(codes.Internal) },
			wantDeletes: 1, wantErr: true, wantFinal: true,
			wantEvent: "VolumeFailedDelete",
		},
		{
			// A process that restarted after dropping the finalizer remembers nothing; the PV waits for
			// another finalizer (pv-protection) and its volume is gone.
			name: "being deleted without our finalizer: no DeleteVolume",
			pv: releasedPV(func(pv *v1.PersistentVolume) {
				now := metav1.Now()
				pv.DeletionTimestamp = &now
				pv.Finalizers = []string{"kubernetes.io/pv-protection"}
			}),
		},
		{
			// A process that restarted between the PV delete and the finalizer patch: DeleteVolume again
			// (idempotent), then the patch.
			name: "being deleted with our finalizer: DeleteVolume, drop finalizer",
			pv: releasedPV(func(pv *v1.PersistentVolume) {
				now := metav1.Now()
				pv.DeletionTimestamp = &now
			}),
			wantAct:     []string{"patch persistentvolumes"},
			wantDeletes: 1,
		},
		{
			name:      "PV of another driver: nothing",
			pv:        releasedPV(func(pv *v1.PersistentVolume) { pv.Spec.CSI.Driver = "other" }),
			wantFinal: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, defaultConfig(), append([]runtime.Object{tc.pv}, tc.objs...)...)
			if tc.setup != nil {
				tc.setup(h)
			}
			err := h.p.SyncVolume(context.Background(), tc.pv.DeepCopy())
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if got := h.actions(); !equal(got, tc.wantAct) {
				t.Errorf("actions %q, want %q", got, tc.wantAct)
			}
			if len(h.csi.Deletes) != tc.wantDeletes {
				t.Errorf("DeleteVolume calls %d, want %d", len(h.csi.Deletes), tc.wantDeletes)
			}
			if len(h.csi.Deletes) > 0 && h.csi.Deletes[0].GetSecrets()["key"] != tc.wantSecret {
				t.Errorf("DeleteVolume secrets %v, want key=%q", h.csi.Deletes[0].GetSecrets(), tc.wantSecret)
			}
			if pv, err := h.kube.CoreV1().PersistentVolumes().Get(context.Background(), volName, metav1.GetOptions{}); err == nil {
				if slices.Contains(pv.Finalizers, VolumeFinalizer) != tc.wantFinal {
					t.Errorf("finalizers %v, want ours %v", pv.Finalizers, tc.wantFinal)
				}
			}
			if tc.wantEvent != "" && !hasEvent(h.events(), tc.wantEvent) {
				t.Errorf("no %s event", tc.wantEvent)
			}
		})
	}
}

// Our own writes make the informer deliver the PV again (deleted, then without finalizer), possibly before the
// cache shows the change; none of those deliveries may call DeleteVolume again
// (kubernetes-csi/external-provisioner#1235).
func TestSyncVolumeDeletesOnce(t *testing.T) {
	pv := releasedPV()
	h := newHarness(t, defaultConfig(), pv)
	for i := 0; i < 3; i++ {
		// Stale copies, as the informer may still hold them.
		if err := h.p.SyncVolume(context.Background(), pv.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	if len(h.csi.Deletes) != 1 {
		t.Errorf("DeleteVolume called %d times, want 1", len(h.csi.Deletes))
	}
	if got, want := h.actions(), []string{"delete persistentvolumes", "patch persistentvolumes"}; !equal(got, want) {
		t.Errorf("actions %q, want %q", got, want)
	}
	// A later PV of the same name is a new object: the record of the old one does not apply to it.
	newer := pv.DeepCopy()
	newer.UID = "pv-uid-2"
	if h.p.deleteStage(newer) != stageNone {
		t.Error("the record of a PV applied to a later PV of the same name")
	}
	h.p.Forget(pv.Name)
	if h.p.deleteStage(pv) != stageNone {
		t.Error("Forget kept the stage")
	}
}

// The usual rescue of a volume whose deletion fails: the user patches the Released PV to Retain. The PV must
// still be there, not deleted, and keep its volume and its binding record.
func TestFailedDeleteCanBeRescuedWithRetain(t *testing.T) {
	pv := releasedPV()
	h := newHarness(t, defaultConfig(), pv)
	h.csi.DeleteErr = testutil.Code(codes.Internal)
	if err := h.p.SyncVolume(context.Background(), pv.DeepCopy()); err == nil {
		t.Fatal("a failing DeleteVolume was not reported")
	}
	rescued := pv.DeepCopy()
	rescued.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
	if _, err := h.kube.CoreV1().PersistentVolumes().Update(context.Background(), rescued, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.p.SyncVolume(context.Background(), rescued); err != nil {
		t.Fatal(err)
	}
	got, err := h.kube.CoreV1().PersistentVolumes().Get(context.Background(), volName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the PV is gone after the rescue: %v", err)
	}
	if got.DeletionTimestamp != nil || got.Status.Phase != v1.VolumeReleased {
		t.Errorf("rescued PV: deletion %v, phase %s; want not deleted and Released", got.DeletionTimestamp, got.Status.Phase)
	}
	if len(h.csi.Deletes) != 1 {
		t.Errorf("DeleteVolume called %d times, want 1 (before the rescue)", len(h.csi.Deletes))
	}
}
