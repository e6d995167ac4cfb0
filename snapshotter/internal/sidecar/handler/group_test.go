package handler

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	grouplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumegroupsnapshot/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	sharedtest "github.com/stowage-csi/stowage/shared/testutil"
	"github.com/stowage-csi/stowage/snapshotter/internal/sidecar/sidecartest"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// fakeGroupCSI records the group calls and answers with what is set on it.
type fakeGroupCSI struct {
	mu        sync.Mutex
	group     *csi.VolumeGroupSnapshot
	createErr error
	creates   []*csi.CreateVolumeGroupSnapshotRequest
	deletes   []*csi.DeleteVolumeGroupSnapshotRequest
	gets      []*csi.GetVolumeGroupSnapshotRequest
}

func (f *fakeGroupCSI) CreateGroup(_ context.Context, req *csi.CreateVolumeGroupSnapshotRequest) (*csi.VolumeGroupSnapshot, error) {
	return sharedtest.Answer(&f.mu, &f.creates, req, &f.group, &f.createErr)
}

func (f *fakeGroupCSI) DeleteGroup(_ context.Context, req *csi.DeleteVolumeGroupSnapshotRequest) error {
	return sharedtest.Record(&f.mu, &f.deletes, req, nil)
}

func (f *fakeGroupCSI) GetGroup(_ context.Context, req *csi.GetVolumeGroupSnapshotRequest) (*csi.VolumeGroupSnapshot, error) {
	return sharedtest.Answer(&f.mu, &f.gets, req, &f.group, nil)
}

const groupUID = "9f1c2d3e-aaaa-bbbb-cccc-0123456789ab"

func groupContent(opts ...func(*groupv1.VolumeGroupSnapshotContent)) *groupv1.VolumeGroupSnapshotContent {
	class := "gclass"
	gc := &groupv1.VolumeGroupSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: "g1", UID: "uid-g1", ResourceVersion: "1", Finalizers: []string{snapapi.GroupContentBoundFinalizer}},
		Spec: groupv1.VolumeGroupSnapshotContentSpec{
			Driver: sidecartest.Driver, DeletionPolicy: snapv1.VolumeSnapshotContentDelete, VolumeGroupSnapshotClassName: &class,
			Source:                 groupv1.VolumeGroupSnapshotContentSource{VolumeHandles: []string{"vol-1", "vol-2"}},
			VolumeGroupSnapshotRef: corev1.ObjectReference{Namespace: "ns", Name: "group", UID: groupUID},
		},
	}
	for _, o := range opts {
		o(gc)
	}
	return gc
}

func madeGroup() *csi.VolumeGroupSnapshot {
	at := timestamppb.New(testNow.Add(-time.Minute))
	return &csi.VolumeGroupSnapshot{GroupSnapshotId: "group-1", ReadyToUse: true, CreationTime: at, Snapshots: []*csi.Snapshot{
		{SnapshotId: "snap-1", SourceVolumeId: "vol-1", SizeBytes: 1 << 30, ReadyToUse: true, CreationTime: at, GroupSnapshotId: "group-1"},
		{SnapshotId: "snap-2", SourceVolumeId: "vol-2", SizeBytes: 2 << 30, ReadyToUse: true, CreationTime: at, GroupSnapshotId: "group-1"},
	}}
}

func groupReleasedBySC(gc *groupv1.VolumeGroupSnapshotContent) {
	ts := metav1.NewTime(testNow)
	gc.DeletionTimestamp = &ts
	if gc.Annotations == nil {
		gc.Annotations = map[string]string{}
	}
	gc.Annotations[snapapi.AnnGroupBeingDeleted] = "yes"
}

func groupBeingCreated(gc *groupv1.VolumeGroupSnapshotContent) {
	if gc.Annotations == nil {
		gc.Annotations = map[string]string{}
	}
	gc.Annotations[snapapi.AnnGroupBeingCreated] = "yes"
}

func TestGroupSync(t *testing.T) {
	class := &groupv1.VolumeGroupSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "gclass"}, Driver: sidecartest.Driver,
		Parameters: map[string]string{"consistency": "crash", snapapi.ParamGroupSnapshotterSecretName: "x", snapapi.ParamGroupSnapshotterSecretNamespace: "y"}}
	readyStatus := func(gc *groupv1.VolumeGroupSnapshotContent) {
		h := "group-1"
		gc.Status = &groupv1.VolumeGroupSnapshotContentStatus{VolumeGroupSnapshotHandle: &h, ReadyToUse: ptr(true),
			VolumeSnapshotInfoList: []groupv1.VolumeSnapshotInfo{{VolumeHandle: "vol-1", SnapshotHandle: "snap-1"}, {VolumeHandle: "vol-2", SnapshotHandle: "snap-2"}}}
	}
	tests := []struct {
		name       string
		csi        *fakeGroupCSI
		content    *groupv1.VolumeGroupSnapshotContent
		wantErr    bool
		wantSnap   []string
		wantCreate *csi.CreateVolumeGroupSnapshotRequest
		wantDelete *csi.DeleteVolumeGroupSnapshotRequest
		wantGets   int
		wantEvents []string
		check      func(t *testing.T, gc *groupv1.VolumeGroupSnapshotContent)
	}{
		{
			name:    "create: annotation, status with the members, annotation removed",
			csi:     &fakeGroupCSI{group: madeGroup()},
			content: groupContent(),
			wantSnap: []string{
				"patch volumegroupsnapshotcontents g1",
				"patch volumegroupsnapshotcontents/status g1",
				"patch volumegroupsnapshotcontents g1",
			},
			wantCreate: &csi.CreateVolumeGroupSnapshotRequest{Name: "groupsnapshot-" + groupUID, SourceVolumeIds: []string{"vol-1", "vol-2"},
				Parameters: map[string]string{"consistency": "crash"}},
			check: func(t *testing.T, gc *groupv1.VolumeGroupSnapshotContent) {
				s := gc.Status
				if s == nil || *s.VolumeGroupSnapshotHandle != "group-1" || !*s.ReadyToUse || s.CreationTime == nil || len(s.VolumeSnapshotInfoList) != 2 {
					t.Fatalf("status = %+v, want group-1 ready with two members", s)
				}
				m := s.VolumeSnapshotInfoList[1]
				if m.VolumeHandle != "vol-2" || m.SnapshotHandle != "snap-2" || *m.RestoreSize != 2<<30 || !*m.ReadyToUse {
					t.Errorf("member = %+v, want vol-2's snap-2, 2Gi, ready", m)
				}
				if _, ok := gc.Annotations[snapapi.AnnGroupBeingCreated]; ok {
					t.Error("being-created annotation left after success")
				}
			},
		},
		{
			name:       "final error: annotation removed, error in status, Event",
			csi:        &fakeGroupCSI{createErr: status.Error(codes.InvalidArgument, "mixed zones")},
			content:    groupContent(),
			wantErr:    true,
			wantSnap:   []string{"patch volumegroupsnapshotcontents g1", "patch volumegroupsnapshotcontents g1", "patch volumegroupsnapshotcontents/status g1"},
			wantCreate: &csi.CreateVolumeGroupSnapshotRequest{Name: "groupsnapshot-" + groupUID, SourceVolumeIds: []string{"vol-1", "vol-2"}, Parameters: map[string]string{"consistency": "crash"}},
			wantEvents: []string{"Warning " + ReasonGroupCreationFailed},
		},
		{
			name:       "released: DeleteVolumeGroupSnapshot with the members, finalizer removed",
			csi:        &fakeGroupCSI{},
			content:    groupContent(readyStatus, groupReleasedBySC),
			wantSnap:   []string{"patch volumegroupsnapshotcontents g1"},
			wantDelete: &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "group-1", SnapshotIds: []string{"snap-1", "snap-2"}},
		},
		{
			name:       "released while CreateVolumeGroupSnapshot was in flight: learn the group by name, delete it",
			csi:        &fakeGroupCSI{group: madeGroup()},
			content:    groupContent(groupBeingCreated, groupReleasedBySC),
			wantSnap:   []string{"patch volumegroupsnapshotcontents g1"},
			wantCreate: &csi.CreateVolumeGroupSnapshotRequest{Name: "groupsnapshot-" + groupUID, SourceVolumeIds: []string{"vol-1", "vol-2"}, Parameters: map[string]string{"consistency": "crash"}},
			wantDelete: &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "group-1", SnapshotIds: []string{"snap-1", "snap-2"}},
		},
		{
			name: "released with policy Retain: only the finalizer goes",
			csi:  &fakeGroupCSI{},
			content: groupContent(readyStatus, groupReleasedBySC, func(gc *groupv1.VolumeGroupSnapshotContent) {
				gc.Spec.DeletionPolicy = snapv1.VolumeSnapshotContentRetain
			}),
			wantSnap: []string{"patch volumegroupsnapshotcontents g1"},
		},
		{
			name: "pre-provisioned: GetVolumeGroupSnapshot, status written",
			csi:  &fakeGroupCSI{group: madeGroup()},
			content: groupContent(func(gc *groupv1.VolumeGroupSnapshotContent) {
				gc.Spec.Source = groupv1.VolumeGroupSnapshotContentSource{GroupSnapshotHandles: &groupv1.GroupSnapshotHandles{
					VolumeGroupSnapshotHandle: "group-1", VolumeSnapshotHandles: []string{"snap-1", "snap-2"}}}
			}),
			wantSnap: []string{"patch volumegroupsnapshotcontents/status g1"},
			wantGets: 1,
		},
		{
			name:    "ready group: nothing",
			csi:     &fakeGroupCSI{},
			content: groupContent(readyStatus),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			_ = classes.Add(class)
			snap := newSnapClientset(t, tt.content)
			stored, err := snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(context.Background(), tt.content.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			snap.ClearActions()
			events := record.NewFakeRecorder(10)
			h := NewGroup(GroupConfig{
				Common: Common{Driver: sidecartest.Driver, Kube: fake.NewClientset(), Client: snap, NamePrefix: "groupsnapshot",
					NameUUIDLength: -1, Events: events, PollInterval: pollInterval, Now: func() time.Time { return testNow }},
				ClassLister: grouplisters.NewVolumeGroupSnapshotClassLister(classes), CSI: tt.csi})
			_, err = h.Sync(testContext(t), stored)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Sync error = %v, want error %v", err, tt.wantErr)
			}
			wantStrings(t, "snapshot API requests", sidecartest.Actions(snap), tt.wantSnap)
			e := &env{events: events}
			wantStrings(t, "events", e.eventReasons(), tt.wantEvents)
			if (tt.wantCreate == nil) != (len(tt.csi.creates) == 0) || (tt.wantCreate != nil && !proto.Equal(tt.csi.creates[0], tt.wantCreate)) {
				t.Errorf("CreateVolumeGroupSnapshot requests = %v, want %v", tt.csi.creates, tt.wantCreate)
			}
			if (tt.wantDelete == nil) != (len(tt.csi.deletes) == 0) || (tt.wantDelete != nil && !proto.Equal(tt.csi.deletes[0], tt.wantDelete)) {
				t.Errorf("DeleteVolumeGroupSnapshot requests = %v, want %v", tt.csi.deletes, tt.wantDelete)
			}
			if len(tt.csi.gets) != tt.wantGets {
				t.Errorf("GetVolumeGroupSnapshot called %d times, want %d", len(tt.csi.gets), tt.wantGets)
			}
			gc, err := snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(context.Background(), "g1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantDelete != nil && slices.Contains(gc.Finalizers, snapapi.GroupContentBoundFinalizer) {
				t.Errorf("finalizers = %v after the group's deletion, want ours removed", gc.Finalizers)
			}
			if tt.check != nil {
				tt.check(t, gc)
			}
		})
	}
}
