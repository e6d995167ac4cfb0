package handler

import (
	"slices"
	"testing"

	storagev1 "k8s.io/api/storage/v1"

	"github.com/stowage-csi/stowage/attacher/internal/testutil"
)

func TestTrivial(t *testing.T) {
	tests := []struct {
		name        string
		va          *storagev1.VolumeAttachment
		wantActions []string
	}{
		{name: "marks attached in one status write, no finalizer", va: testutil.VA("va1", "pv1", "node1"), wantActions: []string{"patch volumeattachments/status va1"}},
		{name: "attached stays as is", va: testutil.VA("va1", "pv1", "node1", attached)},
		{name: "deletion needs nothing", va: testutil.VA("va1", "pv1", "node1", attached, deleting)},
		{name: "another driver's is ignored", va: testutil.VA("va1", "pv1", "node1", func(va *storagev1.VolumeAttachment) { va.Spec.Attacher = "other" })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv("", Capabilities{}, nil, tc.va)
			h := NewTrivial(e.cfg)
			if _, err := h.SyncVA(testContext(t), e.stored(t, tc.va.Name)); err != nil {
				t.Fatal(err)
			}
			if got := testutil.Actions(e.client); !slices.Equal(got, tc.wantActions) {
				t.Errorf("actions = %q, want %q", got, tc.wantActions)
			}
			got := e.va(t, "va1")
			if len(got.Finalizers) != 0 {
				t.Errorf("finalizers = %v, want none", got.Finalizers)
			}
			if tc.va.DeletionTimestamp == nil && tc.va.Spec.Attacher == testutil.Driver && !got.Status.Attached {
				t.Error("not marked attached")
			}
		})
	}
}
