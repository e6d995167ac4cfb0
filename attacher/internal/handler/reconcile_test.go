package handler

import (
	"slices"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stowage-csi/stowage/attacher/internal/testutil"
)

func TestReconcile(t *testing.T) {
	ok := withAnnotations(NodeIDAnnotation, "i-1", VolumeHandleAnnotation, "vol-1")
	tests := []struct {
		name      string
		caps      Capabilities
		published map[string][]string
		objs      []runtime.Object
		want      []string
		wantLists int
	}{
		{
			name:      "published as Kubernetes says: nothing to do",
			caps:      Capabilities{ListPublishedNodes: true},
			published: map[string][]string{"vol-1": {"i-1"}},
			objs:      []runtime.Object{testutil.VA("va1", "pv1", "node1", withFinalizer, attached, ok)},
			wantLists: 1,
		},
		{
			name:      "published to another node: attach again",
			caps:      Capabilities{ListPublishedNodes: true},
			published: map[string][]string{"vol-1": {"i-2"}},
			objs:      []runtime.Object{testutil.VA("va1", "pv1", "node1", withFinalizer, attached, ok)},
			want:      []string{"va1"},
			wantLists: 1,
		},
		{
			name:      "unknown to the driver: attach again",
			caps:      Capabilities{ListPublishedNodes: true},
			published: map[string][]string{},
			objs:      []runtime.Object{testutil.VA("va1", "pv1", "node1", withFinalizer, attached, ok)},
			want:      []string{"va1"},
			wantLists: 1,
		},
		{
			name:      "not attached, deleting or another driver's: skipped",
			caps:      Capabilities{ListPublishedNodes: true},
			published: map[string][]string{},
			objs: []runtime.Object{
				testutil.VA("va1", "pv1", "node1", withFinalizer, ok),
				testutil.VA("va2", "pv1", "node1", withFinalizer, attached, deleting, ok),
				testutil.VA("va3", "pv1", "node1", attached, ok, func(va *storagev1.VolumeAttachment) { va.Spec.Attacher = "other" }),
			},
			wantLists: 1,
		},
		{
			name: "without LIST_VOLUMES_PUBLISHED_NODES the driver is not asked",
			objs: []runtime.Object{testutil.VA("va1", "pv1", "node1", withFinalizer, attached, ok)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv("", tc.caps, &testutil.FakeCSI{Published: tc.published, PublishContext: map[string]string{}}, tc.objs...)
			h := NewCSI(e.cfg)
			got, err := h.Reconcile(testContext(t))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Reconcile = %v, want %v", got, tc.want)
			}
			if e.csi.Lists != tc.wantLists {
				t.Errorf("ListVolumes calls = %d, want %d", e.csi.Lists, tc.wantLists)
			}
			if len(e.client.Actions()) != 0 {
				t.Errorf("Reconcile wrote %q, want no API request", testutil.Actions(e.client))
			}
		})
	}
}

// A VolumeAttachment the reconcile found detached in the driver is published again on its next sync,
// and, when the publish context is unchanged, without any API write.
func TestForcedSyncPublishesAgain(t *testing.T) {
	e := newEnv("", Capabilities{ListPublishedNodes: true}, &testutil.FakeCSI{Published: map[string][]string{}},
		testutil.VA("va1", "pv1", "node1", withFinalizer, attached, withAnnotations(NodeIDAnnotation, "i-1", VolumeHandleAnnotation, "vol-1")),
		testutil.PV("pv1", "vol-1"), testutil.CSINode("node1", "i-1"))
	va := e.stored(t, "va1")
	h := NewCSI(e.cfg)
	ctx := testContext(t)
	if _, err := h.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.SyncVA(ctx, va); err != nil {
		t.Fatal(err)
	}
	if len(e.csi.Publishes) != 1 || len(e.client.Actions()) != 0 {
		t.Fatalf("publishes = %d, actions = %q; want 1 publish and no write", len(e.csi.Publishes), testutil.Actions(e.client))
	}
	// The force is spent: the next sync of the attached VolumeAttachment does nothing.
	if _, err := h.SyncVA(ctx, va); err != nil {
		t.Fatal(err)
	}
	if len(e.csi.Publishes) != 1 {
		t.Errorf("publishes = %d after the forced sync, want 1", len(e.csi.Publishes))
	}
}
