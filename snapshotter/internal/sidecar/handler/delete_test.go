package handler

import (
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stowage-csi/stowage/snapshotter/internal/sidecar/sidecartest"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

func TestDelete(t *testing.T) {
	tests := []struct {
		name     string
		csi      *sidecartest.FakeCSI
		content  *snapv1.VolumeSnapshotContent
		objs     []runtime.Object
		wantErr  bool
		wantSnap []string
		wantKube []string
		// CreateSnapshot calls (to learn an interrupted call's snapshot) and DeleteSnapshot requests
		wantCreates   int
		wantDelete    *csi.DeleteSnapshotRequest
		wantEvents    []string
		wantFinalizer bool
	}{
		{
			name:       "policy Delete: DeleteSnapshot, then one patch drops the finalizer",
			content:    sidecartest.Content("c1", "vol-1", withStatus("snap-1", true), releasedBySC),
			objs:       []runtime.Object{sidecartest.Class(nil)},
			wantSnap:   []string{"patch volumesnapshotcontents c1"},
			wantDelete: &csi.DeleteSnapshotRequest{SnapshotId: "snap-1"},
		},
		{
			name: "deletion secret recorded on the content, class gone",
			content: sidecartest.Content("c1", "vol-1", withStatus("snap-1", true), releasedBySC,
				withAnnotations(snapapi.AnnDeletionSecretName, "creds", snapapi.AnnDeletionSecretNamespace, "ns")),
			objs:       []runtime.Object{secret("ns", "creds")},
			wantKube:   []string{"get secrets creds"},
			wantSnap:   []string{"patch volumesnapshotcontents c1"},
			wantDelete: &csi.DeleteSnapshotRequest{SnapshotId: "snap-1", Secrets: map[string]string{"user": "creds"}},
		},
		{
			name:     "policy Retain: the snapshot stays, the finalizer goes",
			content:  sidecartest.Content("c1", "vol-1", withStatus("snap-1", true), releasedBySC, retain),
			wantSnap: []string{"patch volumesnapshotcontents c1"},
		},
		{
			name:          "DeleteSnapshot fails: Event, finalizer kept",
			csi:           &sidecartest.FakeCSI{DeleteErr: status.Error(codes.Internal, "busy")},
			content:       sidecartest.Content("c1", "vol-1", withStatus("snap-1", true), releasedBySC),
			wantErr:       true,
			wantDelete:    &csi.DeleteSnapshotRequest{SnapshotId: "snap-1"},
			wantEvents:    []string{"Warning " + ReasonDeleteError},
			wantFinalizer: true,
		},
		{
			name:        "released while CreateSnapshot was in flight: ask again by name, delete what it made",
			csi:         &sidecartest.FakeCSI{Snapshot: readySnapshot(false)},
			content:     sidecartest.Content("c1", "vol-1", beingCreatedAnn, releasedBySC),
			objs:        []runtime.Object{sidecartest.Class(nil)},
			wantSnap:    []string{"patch volumesnapshotcontents c1"},
			wantCreates: 1,
			wantDelete:  &csi.DeleteSnapshotRequest{SnapshotId: "snap-1"},
		},
		{
			name:        "released in flight, the driver refuses: nothing was made, finalizer goes",
			csi:         &sidecartest.FakeCSI{CreateErr: status.Error(codes.NotFound, "no volume")},
			content:     sidecartest.Content("c1", "vol-1", beingCreatedAnn, releasedBySC),
			objs:        []runtime.Object{sidecartest.Class(nil)},
			wantSnap:    []string{"patch volumesnapshotcontents c1"},
			wantCreates: 1,
		},
		{
			name:          "released in flight, the driver times out again: everything kept",
			csi:           &sidecartest.FakeCSI{CreateErr: status.Error(codes.DeadlineExceeded, "slow")},
			content:       sidecartest.Content("c1", "vol-1", beingCreatedAnn, releasedBySC),
			objs:          []runtime.Object{sidecartest.Class(nil)},
			wantErr:       true,
			wantCreates:   1,
			wantEvents:    []string{"Warning " + ReasonDeleteError},
			wantFinalizer: true,
		},
		{
			name:     "released before any CreateSnapshot: nothing to delete",
			content:  sidecartest.Content("c1", "vol-1", releasedBySC),
			wantSnap: []string{"patch volumesnapshotcontents c1"},
		},
		{
			name:       "pre-provisioned and never bound: deleted with its spec handle",
			content:    sidecartest.Content("c1", "", preProvisioned("snap-9"), releasedBySC, func(c *snapv1.VolumeSnapshotContent) { c.Spec.VolumeSnapshotRef.UID = "" }),
			wantSnap:   []string{"patch volumesnapshotcontents c1"},
			wantDelete: &csi.DeleteSnapshotRequest{SnapshotId: "snap-9"},
		},
		{
			name: "group member: the group's snapshot is the group's to delete",
			content: sidecartest.Content("c1", "vol-1", withStatus("snap-1", true), releasedBySC, func(c *snapv1.VolumeSnapshotContent) {
				c.Status.VolumeGroupSnapshotHandle = ptr("group-1")
			}),
			wantSnap: []string{"patch volumesnapshotcontents c1"},
		},
		{
			name: "deleted but not released by the snapshot controller: nothing",
			content: sidecartest.Content("c1", "vol-1", withStatus("snap-1", true), releasedBySC, func(c *snapv1.VolumeSnapshotContent) {
				delete(c.Annotations, snapapi.AnnBeingDeleted)
			}),
			wantFinalizer: true,
		},
		{
			name: "finalizer gone already: nothing",
			content: sidecartest.Content("c1", "vol-1", withStatus("snap-1", true), releasedBySC, func(c *snapv1.VolumeSnapshotContent) {
				c.Finalizers = []string{"other"}
			}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t, tt.csi, tt.content, tt.objs, nil)
			e.syncStored(t, tt.content.Name, syncWant{err: tt.wantErr, snap: tt.wantSnap, kube: tt.wantKube, evs: tt.wantEvents})
			if len(e.csi.Creates) != tt.wantCreates {
				t.Errorf("CreateSnapshot called %d times, want %d", len(e.csi.Creates), tt.wantCreates)
			}
			if tt.wantCreates > 0 && e.csi.Creates[0].Name != snapName {
				t.Errorf("CreateSnapshot name = %q, want the original call's %q", e.csi.Creates[0].Name, snapName)
			}
			switch {
			case tt.wantDelete == nil && len(e.csi.Deletes) > 0:
				t.Errorf("DeleteSnapshot called %d times, want 0", len(e.csi.Deletes))
			case tt.wantDelete != nil && len(e.csi.Deletes) != 1:
				t.Errorf("DeleteSnapshot called %d times, want 1", len(e.csi.Deletes))
			case tt.wantDelete != nil && !proto.Equal(e.csi.Deletes[0], tt.wantDelete):
				t.Errorf("DeleteSnapshot request = %v, want %v", e.csi.Deletes[0], tt.wantDelete)
			}
			c := e.content(t, tt.content.Name)
			if hasFinalizer(c) != tt.wantFinalizer {
				t.Errorf("finalizers = %v, want %s present = %v", c.Finalizers, snapapi.ContentBoundFinalizer, tt.wantFinalizer)
			}
			if _, ok := c.Annotations[snapapi.AnnBeingCreated]; ok && !tt.wantFinalizer {
				t.Error("being-created annotation left on a released content")
			}
		})
	}
}

func TestRefresh(t *testing.T) {
	listClass := sidecartest.Class(map[string]string{
		snapapi.ParamSnapshotterListSecretName:      "${volumesnapshotcontent.name}-list",
		snapapi.ParamSnapshotterListSecretNamespace: "kube-system",
	})
	withClass := func(c *snapv1.VolumeSnapshotContent) { c.Spec.VolumeSnapshotClassName = ptr("class") }
	tests := []struct {
		name         string
		csi          *sidecartest.FakeCSI
		noList       bool
		content      *snapv1.VolumeSnapshotContent
		objs         []runtime.Object
		wantErr      bool
		wantAgain    time.Duration
		wantSnap     []string
		wantKube     []string
		wantList     *csi.ListSnapshotsRequest
		wantEvents   []string
		wantReady    bool
		wantRestore  int64
		wantNoStatus bool
	}{
		{
			name:        "pre-provisioned: ListSnapshots for its ID, status written",
			csi:         &sidecartest.FakeCSI{Snapshot: readySnapshot(true)},
			content:     sidecartest.Content("c1", "", preProvisioned("snap-1")),
			wantSnap:    []string{"patch volumesnapshotcontents/status c1"},
			wantList:    &csi.ListSnapshotsRequest{SnapshotId: "snap-1"},
			wantReady:   true,
			wantRestore: 1 << 30,
		},
		{
			name:        "list secret from the class, templated with the content's name",
			csi:         &sidecartest.FakeCSI{Snapshot: readySnapshot(false)},
			content:     sidecartest.Content("c1", "", preProvisioned("snap-1"), withClass),
			objs:        []runtime.Object{listClass, secret("kube-system", "c1-list")},
			wantAgain:   pollInterval,
			wantKube:    []string{"get secrets c1-list"},
			wantSnap:    []string{"patch volumesnapshotcontents/status c1"},
			wantList:    &csi.ListSnapshotsRequest{SnapshotId: "snap-1", Secrets: map[string]string{"user": "c1-list"}},
			wantRestore: 1 << 30,
		},
		{
			name:      "driver without LIST_SNAPSHOTS: taken as ready without a call",
			noList:    true,
			content:   sidecartest.Content("c1", "", preProvisioned("snap-1")),
			wantSnap:  []string{"patch volumesnapshotcontents/status c1"},
			wantReady: true,
		},
		{
			name:       "snapshot not found: error in status, Event",
			csi:        &sidecartest.FakeCSI{ListErr: status.Error(codes.NotFound, "no snap-1")},
			content:    sidecartest.Content("c1", "", preProvisioned("snap-1")),
			wantErr:    true,
			wantSnap:   []string{"patch volumesnapshotcontents/status c1"},
			wantList:   &csi.ListSnapshotsRequest{SnapshotId: "snap-1"},
			wantEvents: []string{"Warning " + ReasonCheckFailed},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t, tt.csi, tt.content, tt.objs, func(c *Config) { c.ListSnapshots = !tt.noList })
			e.syncStored(t, tt.content.Name, syncWant{err: tt.wantErr, again: tt.wantAgain, snap: tt.wantSnap, kube: tt.wantKube, evs: tt.wantEvents})
			switch {
			case tt.wantList == nil && len(e.csi.Lists) > 0:
				t.Errorf("ListSnapshots called %d times, want 0", len(e.csi.Lists))
			case tt.wantList != nil && (len(e.csi.Lists) != 1 || !proto.Equal(e.csi.Lists[0], tt.wantList)):
				t.Errorf("ListSnapshots requests = %v, want one %v", e.csi.Lists, tt.wantList)
			}
			if len(e.csi.Creates) > 0 {
				t.Errorf("CreateSnapshot called for a pre-provisioned content")
			}
			if tt.wantErr {
				return
			}
			s := e.content(t, tt.content.Name).Status
			if s == nil || *s.SnapshotHandle != "snap-1" || *s.ReadyToUse != tt.wantReady || s.CreationTime == nil {
				t.Fatalf("status = %+v, want snap-1 with readyToUse %v and a creation time", s, tt.wantReady)
			}
			if got := s.RestoreSize; (got == nil) != (tt.wantRestore == 0) || (got != nil && *got != tt.wantRestore) {
				t.Errorf("restoreSize = %v, want %d", got, tt.wantRestore)
			}
		})
	}
}
