package provision

import (
	"context"
	"slices"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
)

func snapshotPair(mods ...func(*snapv1.VolumeSnapshot, *snapv1.VolumeSnapshotContent)) (*snapv1.VolumeSnapshot, *snapv1.VolumeSnapshotContent) {
	ready, content, handle := true, "content-1", "snap-123"
	size := resource.MustParse("1Gi")
	fs := v1.PersistentVolumeFilesystem
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "snap", UID: "vs-uid", ResourceVersion: "1", Finalizers: []string{"snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"}},
		Status:     &snapv1.VolumeSnapshotStatus{ReadyToUse: &ready, BoundVolumeSnapshotContentName: &content, RestoreSize: &size},
	}
	vsc := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: content},
		Spec: snapv1.VolumeSnapshotContentSpec{
			Driver:            testutil.Driver,
			VolumeSnapshotRef: v1.ObjectReference{Namespace: "ns", Name: "snap", UID: "vs-uid"},
			SourceVolumeMode:  &fs,
		},
		Status: &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle},
	}
	for _, m := range mods {
		m(vs, vsc)
	}
	return vs, vsc
}

func TestRestoreFromSnapshot(t *testing.T) {
	block := v1.PersistentVolumeBlock
	tests := []struct {
		name      string
		mod       func(*snapv1.VolumeSnapshot, *snapv1.VolumeSnapshotContent)
		claimMod  func(*v1.PersistentVolumeClaim)
		noCap     bool // the driver lacks CREATE_DELETE_SNAPSHOT
		wantErr   bool
		wantSlow  bool
		wantSnaps bool // CreateVolume got the snapshot as content source
		held      bool // the snapshot carries the as-source finalizer already: only its release is written
	}{
		{name: "ready snapshot of this driver", wantSnaps: true},
		{name: "driver without CREATE_DELETE_SNAPSHOT", noCap: true, wantErr: true, wantSlow: true},
		{name: "not ready", mod: func(vs *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) {
			f := false
			vs.Status.ReadyToUse = &f
		}, wantErr: true},
		{name: "being deleted", mod: func(vs *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) {
			now := metav1.Now()
			vs.DeletionTimestamp = &now
		}, wantErr: true},
		{name: "being deleted, held by our finalizer for a restore under way (upstream's or ours)", mod: func(vs *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) {
			now := metav1.Now()
			vs.DeletionTimestamp = &now
			vs.Finalizers = append(vs.Finalizers, SnapshotSourceFinalizer)
		}, wantSnaps: true, held: true},
		{name: "other driver", mod: func(_ *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent) { c.Spec.Driver = "other" }, wantErr: true, wantSlow: true},
		{name: "content bound elsewhere", mod: func(_ *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent) { c.Spec.VolumeSnapshotRef.Name = "x" }, wantErr: true},
		{name: "restore size larger than the claim", mod: func(vs *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) {
			q := resource.MustParse("2Gi")
			vs.Status.RestoreSize = &q
		}, wantErr: true, wantSlow: true},
		{name: "volume mode change refused", claimMod: func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeMode = &block }, wantErr: true, wantSlow: true},
		{name: "volume mode change allowed by the content", claimMod: func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeMode = &block },
			mod: func(_ *snapv1.VolumeSnapshot, c *snapv1.VolumeSnapshotContent) {
				c.Annotations = map[string]string{annAllowVolumeModeChange: "true"}
			}, wantSnaps: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mods []func(*snapv1.VolumeSnapshot, *snapv1.VolumeSnapshotContent)
			if tc.mod != nil {
				mods = append(mods, tc.mod)
			}
			vs, vsc := snapshotPair(mods...)
			g := snapshotGroup
			claim := testutil.Claim("ns", "data", uid, "fast", "1Gi", func(c *v1.PersistentVolumeClaim) {
				c.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: &g, Kind: "VolumeSnapshot", Name: "snap"}
			})
			if tc.claimMod != nil {
				tc.claimMod(claim)
			}
			cfg := defaultConfig()
			cfg.Capabilities.Snapshot = !tc.noCap
			h := newHarness(t, cfg, claim, testutil.Class("fast", nil))
			//lint:ignore SA1019 the snapshot client's fake has no NewClientset: it is generated without apply configurations.
			snaps := snapfake.NewSimpleClientset(vs, vsc)
			h.p.Snapshots = snaps
			err := h.p.SyncClaim(context.Background(), claim.DeepCopy())
			if (err != nil) != tc.wantErr || IsSlow(err) != tc.wantSlow {
				t.Fatalf("err %v (slow %v), want err %v slow %v", err, IsSlow(err), tc.wantErr, tc.wantSlow)
			}
			if tc.wantErr {
				if len(h.csi.Creates) != 0 || len(h.actions()) != 0 {
					t.Errorf("refused restore still called CreateVolume %d times / wrote %q", len(h.csi.Creates), h.actions())
				}
				return
			}
			if got := h.csi.Creates[0].VolumeContentSource.GetSnapshot().GetSnapshotId(); got != "snap-123" {
				t.Errorf("content source snapshot %q", got)
			}
			// The as-source finalizer was added before CreateVolume (unless held already) and released once the
			// claim finished.
			var updates int
			for _, a := range snaps.Actions() {
				if a.GetVerb() == "update" {
					updates++
				}
			}
			wantUpdates := 2
			if tc.held {
				wantUpdates = 1
			}
			got, err := snaps.SnapshotV1().VolumeSnapshots("ns").Get(context.Background(), "snap", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if updates != wantUpdates || slices.Contains(got.Finalizers, SnapshotSourceFinalizer) || len(got.Finalizers) != 1 {
				t.Errorf("%d updates of the snapshot, want %d (add, release); finalizers now %v", updates, wantUpdates, got.Finalizers)
			}
		})
	}
}

// The as-source finalizer is upstream's own name, so one an upstream provisioner left on a snapshot (swapped out
// after creating the PV, before releasing the snapshot) is removed by Stowage when it first syncs the bound claim,
// once, and only when no other claim is still being restored from the snapshot. The snapshot-controller's
// similarly named finalizer is never touched.
func TestLeftSnapshotFinalizerReleased(t *testing.T) {
	const controllerFinalizer = "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection"
	g := snapshotGroup
	fromSnap := func(name, volume string) *v1.PersistentVolumeClaim {
		return testutil.Claim("ns", name, "uid-"+name, "fast", "1Gi", func(c *v1.PersistentVolumeClaim) {
			c.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: &g, Kind: "VolumeSnapshot", Name: "snap"}
			c.Spec.VolumeName = volume
		})
	}
	tests := []struct {
		name      string
		others    []*v1.PersistentVolumeClaim
		wantVerbs []string
		wantFinal []string
	}{
		{
			name:      "no other restore: one GET, one update removing only upstream's finalizer",
			wantVerbs: []string{"get", "update"},
			wantFinal: []string{"snapshot.storage.kubernetes.io/volumesnapshot-bound-protection", controllerFinalizer},
		},
		{
			name:      "another claim still being restored from it: kept",
			others:    []*v1.PersistentVolumeClaim{fromSnap("pending", "")},
			wantFinal: []string{"snapshot.storage.kubernetes.io/volumesnapshot-bound-protection", controllerFinalizer, SnapshotSourceFinalizer},
		},
		{
			name:      "other restores from it are bound: removed",
			others:    []*v1.PersistentVolumeClaim{fromSnap("done", "pv-done")},
			wantVerbs: []string{"get", "update"},
			wantFinal: []string{"snapshot.storage.kubernetes.io/volumesnapshot-bound-protection", controllerFinalizer},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vs, vsc := snapshotPair(func(vs *snapv1.VolumeSnapshot, _ *snapv1.VolumeSnapshotContent) {
				vs.Finalizers = append(vs.Finalizers, controllerFinalizer, SnapshotSourceFinalizer)
			})
			claim := fromSnap("data", "pv-data")
			objs := []runtime.Object{claim, testutil.Class("fast", nil)}
			for _, o := range tc.others {
				objs = append(objs, o)
			}
			cfg := defaultConfig()
			cfg.Capabilities.Snapshot = true
			h := newHarness(t, cfg, objs...)
			//lint:ignore SA1019 the snapshot client's fake has no NewClientset: it is generated without apply configurations.
			snaps := snapfake.NewSimpleClientset(vs, vsc)
			h.p.Snapshots = snaps
			for range 2 { // the second sync of the same claim must ask nothing
				if err := h.p.SyncClaim(context.Background(), claim.DeepCopy()); err != nil {
					t.Fatal(err)
				}
			}
			var verbs []string
			for _, a := range snaps.Actions() {
				verbs = append(verbs, a.GetVerb())
			}
			if !equal(verbs, tc.wantVerbs) {
				t.Errorf("snapshot requests %q, want %q", verbs, tc.wantVerbs)
			}
			if len(h.actions()) != 0 || len(h.csi.Creates) != 0 {
				t.Errorf("bound claim: kube requests %q, CreateVolume calls %d", h.actions(), len(h.csi.Creates))
			}
			got, err := snaps.SnapshotV1().VolumeSnapshots("ns").Get(context.Background(), "snap", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Finalizers, tc.wantFinal) {
				t.Errorf("finalizers %v, want %v", got.Finalizers, tc.wantFinal)
			}
		})
	}
}
