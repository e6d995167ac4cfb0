package provision

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
)

// VolumeSettled lets the controller keep a PV out of the volume queue, so it must be true only where SyncVolume
// does nothing: for each PV below, a settled one gets no API request and no DeleteVolume from SyncVolume, and
// an unsettled one is one SyncVolume acts on (or, for Retain and Available, may act on once deleted or Released).
func TestVolumeSettled(t *testing.T) {
	deleting := func(pv *v1.PersistentVolume) {
		now := metav1.Now()
		pv.DeletionTimestamp = &now
	}
	protected := func(pv *v1.PersistentVolume) { pv.Finalizers = append(pv.Finalizers, VolumeFinalizer) }
	tests := []struct {
		name    string
		pv      *v1.PersistentVolume
		settled bool
	}{
		{"bound with our finalizer", boundPV(protected), true},
		{"bound, Retain", boundPV(func(pv *v1.PersistentVolume) {
			pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
		}), true},
		{"Available with our finalizer", boundPV(protected, func(pv *v1.PersistentVolume) { pv.Status.Phase = v1.VolumeAvailable }), true},
		{"bound without our finalizer: it is added", boundPV(), false},
		{"Released: its volume is deleted", releasedPV(), false},
		{"Released, Retain", releasedPV(func(pv *v1.PersistentVolume) {
			pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
		}), false},
		{"bound, Retain, being deleted: our finalizer goes", boundPV(protected, deleting, func(pv *v1.PersistentVolume) {
			pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
		}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, defaultConfig(), tt.pv)
			if got := h.p.VolumeSettled(tt.pv); got != tt.settled {
				t.Fatalf("VolumeSettled = %v, want %v", got, tt.settled)
			}
			if !tt.settled {
				return
			}
			if err := h.p.SyncVolume(context.Background(), tt.pv.DeepCopy()); err != nil {
				t.Fatalf("SyncVolume of a settled PV: %v", err)
			}
			if acts := h.actions(); len(acts) != 0 || len(h.csi.Deletes) != 0 {
				t.Errorf("SyncVolume of a settled PV: requests %v, DeleteVolume calls %d; want none", acts, len(h.csi.Deletes))
			}
		})
	}
}

// ClaimSettled lets the controller keep a claim out of the claim queue, so it must be true only where SyncClaim
// does nothing: a settled claim gets no API request and no CSI call from SyncClaim; claims with work left (an
// intent, an entry in the journal under its UID or an earlier claim's, a snapshot source, deletion, no PV
// yet) are not settled.
func TestClaimSettled(t *testing.T) {
	class := testutil.Class("fast", nil)
	bound := func(c *v1.PersistentVolumeClaim) {
		c.Spec.VolumeName = volName
		c.Status.Phase = v1.ClaimBound
	}
	snapshotGroup := "snapshot.storage.k8s.io"
	fromSnapshot := func(c *v1.PersistentVolumeClaim) {
		c.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: &snapshotGroup, Kind: "VolumeSnapshot", Name: "snap"}
		c.Spec.DataSourceRef = &v1.TypedObjectReference{APIGroup: &snapshotGroup, Kind: "VolumeSnapshot", Name: "snap"}
	}
	pending := testutil.Claim("ns", "data", uid, "fast", "1Gi")
	earlier := testutil.Claim("ns", "data", "6c3a0e3e-1111-4e2b-9a61-0d6a7f5e0002", "fast", "1Gi")
	tests := []struct {
		name    string
		claim   *v1.PersistentVolumeClaim
		setup   func(*harness)
		settled bool
	}{
		{name: "bound", claim: testutil.Claim("ns", "data", uid, "fast", "1Gi", bound), settled: true},
		{name: "pending: it is provisioned", claim: pending},
		{name: "bound with an intent", claim: testutil.Claim("ns", "data", uid, "fast", "1Gi", bound, withLegacyIntent)},
		{name: "bound, being deleted", claim: testutil.Claim("ns", "data", uid, "fast", "1Gi", bound, deleting)},
		{name: "bound, from a snapshot", claim: testutil.Claim("ns", "data", uid, "fast", "1Gi", bound, fromSnapshot)},
		{name: "bound, its entry in the record", claim: testutil.Claim("ns", "data", uid, "fast", "1Gi", bound), setup: recorded(pending)},
		{name: "bound, an earlier claim's entry in the record", claim: testutil.Claim("ns", "data", uid, "fast", "1Gi", bound), setup: recorded(earlier)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, defaultConfig(), []runtime.Object{class, tt.claim}...)
			if tt.setup != nil {
				tt.setup(h)
			}
			if got := h.p.ClaimSettled(tt.claim); got != tt.settled {
				t.Fatalf("ClaimSettled = %v, want %v", got, tt.settled)
			}
			if !tt.settled {
				return
			}
			if err := h.p.SyncClaim(context.Background(), tt.claim.DeepCopy()); err != nil {
				t.Fatalf("SyncClaim of a settled claim: %v", err)
			}
			if acts := h.actions(); len(acts) != 0 || len(h.csi.Creates)+len(h.csi.Deletes) != 0 {
				t.Errorf("SyncClaim of a settled claim: requests %v, CSI calls %d; want none", acts, len(h.csi.Creates)+len(h.csi.Deletes))
			}
		})
	}
}
