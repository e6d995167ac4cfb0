package provision

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"
)

// boundPV is a PV this driver provisioned, bound, reclaim policy Delete, without the deletion-protection finalizer
// (made before the finalizer existed, or by a provisioner that did not add it).
func boundPV(opts ...func(*v1.PersistentVolume)) *v1.PersistentVolume {
	return releasedPV(append([]func(*v1.PersistentVolume){func(pv *v1.PersistentVolume) {
		pv.Status.Phase = v1.VolumeBound
		pv.Finalizers = []string{"kubernetes.io/pv-protection"}
	}}, opts...)...)
}

// As upstream, a bound dynamically provisioned PV of this driver with reclaim policy Delete gets the finalizer
// on sync, in one merge patch guarded by the PV's resourceVersion; no other PV gets it.
func TestSyncVolumeAddsProtectionFinalizer(t *testing.T) {
	deleting := func(pv *v1.PersistentVolume) {
		now := metav1.Now()
		pv.DeletionTimestamp = &now
	}
	tests := []struct {
		name         string
		pv           *v1.PersistentVolume
		stale        bool // the stored PV changed after the copy handed to SyncVolume
		wantAct      []string
		wantConflict bool
		wantFinal    []string // the stored PV's finalizers after the sync
	}{
		{
			name:      "bound, Delete, provisioned by this driver: added, other finalizers kept",
			pv:        boundPV(),
			wantAct:   []string{"patch persistentvolumes"},
			wantFinal: []string{"kubernetes.io/pv-protection", VolumeFinalizer},
		},
		{
			name:      "already there: no request",
			pv:        boundPV(func(pv *v1.PersistentVolume) { pv.Finalizers = append(pv.Finalizers, VolumeFinalizer) }),
			wantFinal: []string{"kubernetes.io/pv-protection", VolumeFinalizer},
		},
		{
			name: "Retain policy: not added",
			pv: boundPV(func(pv *v1.PersistentVolume) {
				pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
			}),
			wantFinal: []string{"kubernetes.io/pv-protection"},
		},
		{
			name:      "not bound yet (Available): not added",
			pv:        boundPV(func(pv *v1.PersistentVolume) { pv.Status.Phase = v1.VolumeAvailable }),
			wantFinal: []string{"kubernetes.io/pv-protection"},
		},
		{
			name:      "being deleted: not added",
			pv:        boundPV(deleting),
			wantFinal: []string{"kubernetes.io/pv-protection"},
		},
		{
			name:      "static PV of this driver (no provisioned-by): not added",
			pv:        boundPV(func(pv *v1.PersistentVolume) { pv.Annotations = nil }),
			wantFinal: []string{"kubernetes.io/pv-protection"},
		},
		{
			name:      "provisioned by another provisioner: not added",
			pv:        boundPV(func(pv *v1.PersistentVolume) { pv.Annotations[annProvisionedBy] = "other.csi.example.com" }),
			wantFinal: []string{"kubernetes.io/pv-protection"},
		},
		{
			name:         "stale copy: 409, not added",
			pv:           boundPV(),
			stale:        true,
			wantAct:      []string{"patch persistentvolumes"},
			wantConflict: true,
			wantFinal:    []string{"kubernetes.io/pv-protection"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, defaultConfig(), tc.pv)
			if tc.stale {
				newer := h.pv(t, volName)
				newer.Labels = map[string]string{"changed": "yes"}
				if _, err := h.kube.CoreV1().PersistentVolumes().Update(context.Background(), newer, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				h.kube.ClearActions()
			}
			err := h.p.SyncVolume(context.Background(), tc.pv.DeepCopy())
			if tc.wantConflict != apierrors.IsConflict(err) || (!tc.wantConflict && err != nil) {
				t.Fatalf("SyncVolume = %v, want conflict %t", err, tc.wantConflict)
			}
			if got := h.actions(); !equal(got, tc.wantAct) {
				t.Errorf("actions %q, want %q", got, tc.wantAct)
			}
			for _, a := range h.kube.Actions() {
				pa, ok := a.(k8stesting.PatchAction)
				if !ok {
					continue
				}
				var body struct {
					Metadata struct {
						ResourceVersion string   `json:"resourceVersion"`
						Finalizers      []string `json:"finalizers"`
					} `json:"metadata"`
				}
				if err := json.Unmarshal(pa.GetPatch(), &body); err != nil {
					t.Fatalf("patch %s: %v", pa.GetPatch(), err)
				}
				if body.Metadata.ResourceVersion != tc.pv.ResourceVersion || !slices.Contains(body.Metadata.Finalizers, VolumeFinalizer) {
					t.Errorf("patch %s: want resourceVersion %q and finalizer %s", pa.GetPatch(), tc.pv.ResourceVersion, VolumeFinalizer)
				}
			}
			if got := h.pv(t, volName).Finalizers; !slices.Equal(got, tc.wantFinal) {
				t.Errorf("finalizers %v, want %v", got, tc.wantFinal)
			}
			if len(h.csi.Deletes) != 0 {
				t.Errorf("DeleteVolume called %d times on a PV that is not released", len(h.csi.Deletes))
			}
		})
	}
}

// A released PV without the finalizer is not given one: it goes straight to deletion as before, so adding the
// finalizer never holds up a volume that is already to be deleted.
func TestReleasedPVWithoutFinalizerIsDeletedNotProtected(t *testing.T) {
	pv := releasedPV(func(pv *v1.PersistentVolume) { pv.Finalizers = nil })
	h := newHarness(t, defaultConfig(), pv)
	if err := h.p.SyncVolume(context.Background(), pv.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if got, want := h.actions(), []string{"delete persistentvolumes"}; !equal(got, want) {
		t.Errorf("actions %q, want %q", got, want)
	}
	if len(h.csi.Deletes) != 1 {
		t.Errorf("DeleteVolume calls %d, want 1", len(h.csi.Deletes))
	}
}
