package controller

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// Group builders.

func labelled(pvc *v1.PersistentVolumeClaim) { pvc.Labels = map[string]string{"app": "db"} }

func groupClass(name string, policy snapv1.DeletionPolicy, isDefault bool) *groupv1.VolumeGroupSnapshotClass {
	c := &groupv1.VolumeGroupSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: driver, DeletionPolicy: policy}
	if isDefault {
		c.Annotations = map[string]string{snapapi.AnnGroupDefaultClass: "true"}
	}
	return c
}

func groupSnapshot(name string, opts ...func(*groupv1.VolumeGroupSnapshot)) *groupv1.VolumeGroupSnapshot {
	gs := &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec: groupv1.VolumeGroupSnapshotSpec{Source: groupv1.VolumeGroupSnapshotSource{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		}},
	}
	for _, o := range opts {
		o(gs)
	}
	return gs
}

func withGroupClass(name string) func(*groupv1.VolumeGroupSnapshot) {
	return func(gs *groupv1.VolumeGroupSnapshot) { gs.Spec.VolumeGroupSnapshotClassName = &name }
}

func groupBound(gs *groupv1.VolumeGroupSnapshot) {
	gs.Finalizers = []string{snapapi.GroupSnapshotBoundFinalizer}
	name, ready := "groupsnapcontent-"+string(gs.UID), false
	gs.Status = &groupv1.VolumeGroupSnapshotStatus{BoundVolumeGroupSnapshotContentName: &name, ReadyToUse: &ready}
}

func groupDeleting(gs *groupv1.VolumeGroupSnapshot) {
	now := metav1.Now()
	gs.DeletionTimestamp = &now
}

// dynGroupContent is the content the controller creates for groupSnapshot(group), with handles vol-a and vol-b.
func dynGroupContent(group string, policy snapv1.DeletionPolicy, opts ...func(*groupv1.VolumeGroupSnapshotContent)) *groupv1.VolumeGroupSnapshotContent {
	class := "group-gold"
	gc := &groupv1.VolumeGroupSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: "groupsnapcontent-uid-" + group, Finalizers: []string{snapapi.GroupContentBoundFinalizer}},
		Spec: groupv1.VolumeGroupSnapshotContentSpec{
			VolumeGroupSnapshotRef:       v1.ObjectReference{Namespace: ns, Name: group, UID: types.UID("uid-" + group)},
			Source:                       groupv1.VolumeGroupSnapshotContentSource{VolumeHandles: []string{"vol-a", "vol-b"}},
			VolumeGroupSnapshotClassName: &class,
			DeletionPolicy:               policy,
			Driver:                       driver,
		},
	}
	for _, o := range opts {
		o(gc)
	}
	return gc
}

// groupCut is the status csi-snapshotter writes once CreateVolumeGroupSnapshot has answered.
func groupCut(gc *groupv1.VolumeGroupSnapshotContent) {
	ready, handle, created, size, cut := true, "group-1", metav1.Unix(1700000000, 0), int64(1<<30), int64(1700000000)*1e9
	gc.Status = &groupv1.VolumeGroupSnapshotContentStatus{
		VolumeGroupSnapshotHandle: &handle, CreationTime: &created, ReadyToUse: &ready,
		VolumeSnapshotInfoList: []groupv1.VolumeSnapshotInfo{
			{VolumeHandle: "vol-a", SnapshotHandle: "snap-a", ReadyToUse: &ready, RestoreSize: &size, CreationTime: &cut},
			{VolumeHandle: "vol-b", SnapshotHandle: "snap-b", ReadyToUse: &ready, RestoreSize: &size, CreationTime: &cut},
		},
	}
}

// groupVolumes are two bound claims labelled app=db, their volumes vol-a and vol-b, and an unlabelled claim.
func groupVolumesObjs() []runtime.Object {
	return []runtime.Object{
		claim("a", "pv-a", labelled), volume("pv-a", "a", "vol-a"),
		claim("b", "pv-b", labelled), volume("pv-b", "b", "vol-b"),
		claim("other", "pv-o"), volume("pv-o", "other", "vol-o"),
	}
}

// upstreamGroupHandleAnn is the annotation upstream's snapshot-controller puts on a member content and its
// csi-snapshotter reads, spelled out so that a change of the constant cannot pass unnoticed.
const upstreamGroupHandleAnn = "groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle"

// member is a member VolumeSnapshot as either controller writes it: upstream's carries no label, only the
// group's owner reference, so that is all it has here.
func member(gs *groupv1.VolumeGroupSnapshot, handle string, opts ...func(*snapv1.VolumeSnapshot)) *snapv1.VolumeSnapshot {
	name, _ := memberNames(gs, handle)
	vs := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: ns, UID: types.UID("uid-" + name),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "groupsnapshot.storage.k8s.io/v1", Kind: "VolumeGroupSnapshot", Name: gs.Name, UID: gs.UID}},
		Finalizers:      []string{snapapi.SnapshotInGroupFinalizer},
	}}
	for _, o := range opts {
		o(vs)
	}
	return vs
}

func memberName(group, handle string) (string, string) {
	return memberNames(groupSnapshot(group), handle)
}

func TestSyncGroupSnapshot(t *testing.T) {
	vsA, vscA := memberName("grp", "vol-a")
	vsB, vscB := memberName("grp", "vol-b")
	objs := func(extra ...runtime.Object) []runtime.Object { return append(groupVolumesObjs(), extra...) }
	tests := []struct {
		name        string
		objs        []runtime.Object
		wantErr     bool
		wantActions []string
		wantEvents  []string
		check       func(t *testing.T, e *env)
	}{{
		name: "dynamic: the default group class recorded, finalizer added, content created with the selected volumes' handles, class and policy",
		objs: objs(groupClass("group-gold", snapv1.VolumeSnapshotContentRetain, true), groupClass("group-silver", snapv1.VolumeSnapshotContentDelete, false),
			groupSnapshot("grp")),
		wantActions: []string{
			"get persistentvolumes pv-a", "get persistentvolumes pv-b",
			"patch volumegroupsnapshots grp",
			"patch volumegroupsnapshots grp",
			"get persistentvolumes pv-a", "get persistentvolumes pv-b",
			"create volumegroupsnapshotcontents groupsnapcontent-uid-grp",
			"patch volumegroupsnapshots/status grp",
		},
		wantEvents: []string{"Normal CreatingGroupSnapshot"},
		check: func(t *testing.T, e *env) {
			gc, err := e.snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(context.Background(), "groupsnapcontent-uid-grp", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := groupv1.VolumeGroupSnapshotContentSpec{
				VolumeGroupSnapshotRef: v1.ObjectReference{Kind: "VolumeGroupSnapshot", APIVersion: "groupsnapshot.storage.k8s.io/v1",
					Namespace: ns, Name: "grp", UID: "uid-grp", ResourceVersion: gc.Spec.VolumeGroupSnapshotRef.ResourceVersion},
				Source:                       groupv1.VolumeGroupSnapshotContentSource{VolumeHandles: []string{"vol-a", "vol-b"}},
				VolumeGroupSnapshotClassName: new("group-gold"),
				DeletionPolicy:               snapv1.VolumeSnapshotContentRetain,
				Driver:                       driver,
			}
			if diff := cmp.Diff(want, gc.Spec); diff != "" {
				t.Errorf("group content spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{snapapi.GroupContentBoundFinalizer}, gc.Finalizers); diff != "" {
				t.Errorf("group content finalizers (-want +got):\n%s", diff)
			}
			gs := e.groupSnapshot("grp")
			if diff := cmp.Diff([]string{snapapi.GroupSnapshotBoundFinalizer}, gs.Finalizers); diff != "" {
				t.Errorf("group snapshot finalizers (-want +got):\n%s", diff)
			}
			if gs.Spec.VolumeGroupSnapshotClassName == nil || *gs.Spec.VolumeGroupSnapshotClassName != "group-gold" {
				t.Errorf("group snapshot class = %v, want group-gold", gs.Spec.VolumeGroupSnapshotClassName)
			}
			if !isGroupBound(gs) || isGroupReady(gs) {
				t.Errorf("group snapshot status = %+v, want bound, not ready", gs.Status)
			}
			// The class patch is preconditioned on the version read.
			md, _ := e.patchBody("volumegroupsnapshots", 0)["metadata"].(map[string]any)
			if md["resourceVersion"] == nil {
				t.Errorf("class patch %v has no resourceVersion precondition", md)
			}
		},
	}, {
		name:    "dynamic: no default group class for the driver",
		objs:    objs(groupClass("group-silver", snapv1.VolumeSnapshotContentDelete, false), groupSnapshot("grp")),
		wantErr: true,
		wantActions: []string{
			"get persistentvolumes pv-a", "get persistentvolumes pv-b",
			"patch volumegroupsnapshots/status grp",
		},
		wantEvents: []string{"Warning SetDefaultGroupSnapshotClassFailed"},
	}, {
		name: "content cut with member handles: a snapshot and a content per member, bound, then the group ready",
		objs: objs(groupClass("group-gold", snapv1.VolumeSnapshotContentDelete, true),
			groupSnapshot("grp", withGroupClass("group-gold"), groupBound),
			dynGroupContent("grp", snapv1.VolumeSnapshotContentDelete, groupCut)),
		wantActions: []string{
			"get persistentvolumes pv-a", "get persistentvolumes pv-b",
			"create volumesnapshots " + vsA, "create volumesnapshotcontents " + vscA,
			"patch volumesnapshotcontents/status " + vscA, "patch volumesnapshots/status " + vsA,
			"create volumesnapshots " + vsB, "create volumesnapshotcontents " + vscB,
			"patch volumesnapshotcontents/status " + vscB, "patch volumesnapshots/status " + vsB,
			"patch volumegroupsnapshots/status grp",
		},
		wantEvents: []string{
			"Normal SnapshotCreated", "Normal SnapshotReady", "Normal SnapshotCreated", "Normal SnapshotReady",
			"Normal GroupSnapshotCreated", "Normal GroupSnapshotReady",
		},
		check: func(t *testing.T, e *env) {
			gs := e.groupSnapshot("grp")
			if !isGroupReady(gs) || gs.Status.CreationTime == nil {
				t.Errorf("group status = %+v, want ready with a creation time", gs.Status)
			}
			vs := e.snapshot(vsA)
			if diff := cmp.Diff([]string{snapapi.SnapshotInGroupFinalizer, snapapi.SnapshotBoundFinalizer}, vs.Finalizers); diff != "" {
				t.Errorf("member finalizers (-want +got):\n%s", diff)
			}
			wantOwner := []metav1.OwnerReference{{APIVersion: "groupsnapshot.storage.k8s.io/v1", Kind: "VolumeGroupSnapshot", Name: "grp", UID: "uid-grp"}}
			if diff := cmp.Diff(wantOwner, vs.OwnerReferences); diff != "" || len(vs.Labels) != 0 {
				t.Errorf("member metadata: labels %v, owners (-want +got):\n%s; want upstream's: no labels, the group as owner", vs.Labels, diff)
			}
			if vs.Spec.Source.PersistentVolumeClaimName == nil || *vs.Spec.Source.PersistentVolumeClaimName != "a" {
				t.Errorf("member source = %+v, want claim a", vs.Spec.Source)
			}
			if !isReady(vs) || vs.Status.VolumeGroupSnapshotName == nil || *vs.Status.VolumeGroupSnapshotName != "grp" ||
				*vs.Status.BoundVolumeSnapshotContentName != vscA || vs.Status.RestoreSize.Value() != 1<<30 {
				t.Errorf("member status = %+v, want ready, bound to %s, in group grp, 1Gi", vs.Status, vscA)
			}
			c := e.content(vscA)
			if c.Annotations[upstreamGroupHandleAnn] != "group-1" || c.Spec.Source.VolumeHandle == nil || *c.Spec.Source.VolumeHandle != "vol-a" ||
				c.Spec.DeletionPolicy != snapv1.VolumeSnapshotContentDelete || c.Spec.VolumeSnapshotRef.Name != vsA {
				t.Errorf("member content = %+v, want vol-a's in group group-1, policy Delete, bound to %s", c, vsA)
			}
			if c.Status == nil || *c.Status.SnapshotHandle != "snap-a" || *c.Status.VolumeGroupSnapshotHandle != "group-1" {
				t.Errorf("member content status = %+v, want snap-a in group-1", c.Status)
			}
		},
	}, {
		name: "members already made: only the group status is written",
		objs: objs(groupClass("group-gold", snapv1.VolumeSnapshotContentDelete, true),
			groupSnapshot("grp", withGroupClass("group-gold"), groupBound),
			dynGroupContent("grp", snapv1.VolumeSnapshotContentDelete, groupCut),
			member(groupSnapshot("grp"), "vol-a", memberBoundReady(vscA)), member(groupSnapshot("grp"), "vol-b", memberBoundReady(vscB)),
			memberContent(vscA, vsA, "snap-a"), memberContent(vscB, vsB, "snap-b")),
		wantActions: []string{
			"get persistentvolumes pv-a", "get persistentvolumes pv-b",
			"patch volumegroupsnapshots/status grp",
		},
		wantEvents: []string{"Normal GroupSnapshotCreated", "Normal GroupSnapshotReady"},
	}, {
		name: "pre-provisioned: the content names the group and vice versa; its uid is filled in, the status copied",
		objs: []runtime.Object{
			groupSnapshot("grp", func(gs *groupv1.VolumeGroupSnapshot) {
				gs.Spec.Source = groupv1.VolumeGroupSnapshotSource{VolumeGroupSnapshotContentName: new("pre")}
			}),
			&groupv1.VolumeGroupSnapshotContent{
				ObjectMeta: metav1.ObjectMeta{Name: "pre"},
				Spec: groupv1.VolumeGroupSnapshotContentSpec{
					VolumeGroupSnapshotRef: v1.ObjectReference{Namespace: ns, Name: "grp"},
					Source: groupv1.VolumeGroupSnapshotContentSource{GroupSnapshotHandles: &groupv1.GroupSnapshotHandles{
						VolumeGroupSnapshotHandle: "group-1", VolumeSnapshotHandles: []string{"snap-a", "snap-b"}}},
					DeletionPolicy: snapv1.VolumeSnapshotContentRetain, Driver: driver,
				},
			},
		},
		wantActions: []string{
			"patch volumegroupsnapshots grp",
			"patch volumegroupsnapshotcontents pre",
			"patch volumegroupsnapshots/status grp",
		},
		check: func(t *testing.T, e *env) {
			gc, _ := e.snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(context.Background(), "pre", metav1.GetOptions{})
			if gc.Spec.VolumeGroupSnapshotRef.UID != "uid-grp" {
				t.Errorf("content ref uid = %q, want uid-grp", gc.Spec.VolumeGroupSnapshotRef.UID)
			}
			if gs := e.groupSnapshot("grp"); !isGroupBound(gs) || *gs.Status.BoundVolumeGroupSnapshotContentName != "pre" {
				t.Errorf("group status = %+v, want bound to pre", gs.Status)
			}
		},
	}, {
		name: "pre-provisioned content bound to another group: misbound",
		objs: []runtime.Object{
			groupSnapshot("grp", func(gs *groupv1.VolumeGroupSnapshot) {
				gs.Spec.Source = groupv1.VolumeGroupSnapshotSource{VolumeGroupSnapshotContentName: new("pre")}
			}),
			&groupv1.VolumeGroupSnapshotContent{
				ObjectMeta: metav1.ObjectMeta{Name: "pre"},
				Spec: groupv1.VolumeGroupSnapshotContentSpec{
					VolumeGroupSnapshotRef: v1.ObjectReference{Namespace: ns, Name: "other"},
					Source:                 groupv1.VolumeGroupSnapshotContentSource{GroupSnapshotHandles: &groupv1.GroupSnapshotHandles{VolumeGroupSnapshotHandle: "g"}},
					DeletionPolicy:         snapv1.VolumeSnapshotContentRetain, Driver: driver,
				},
			},
		},
		wantErr:     true,
		wantActions: []string{"patch volumegroupsnapshots grp", "patch volumegroupsnapshots/status grp"},
		wantEvents:  []string{"Warning GroupSnapshotContentMisbound"},
	}, {
		name: "deleted with policy Delete: content marked and deleted, members deleted, the finalizer kept until the content is gone",
		objs: objs(groupSnapshot("grp", withGroupClass("group-gold"), groupBound, groupDeleting),
			dynGroupContent("grp", snapv1.VolumeSnapshotContentDelete, groupCut),
			member(groupSnapshot("grp"), "vol-a"), member(groupSnapshot("grp"), "vol-b")),
		wantActions: []string{
			"patch volumegroupsnapshotcontents groupsnapcontent-uid-grp",
			"delete volumegroupsnapshotcontents groupsnapcontent-uid-grp",
			"delete volumesnapshots " + vsA, "delete volumesnapshots " + vsB,
		},
	}, {
		name: "deleted with policy Retain: content marked, kept, members deleted, the finalizer removed",
		objs: objs(groupSnapshot("grp", withGroupClass("group-gold"), groupBound, groupDeleting),
			dynGroupContent("grp", snapv1.VolumeSnapshotContentRetain, groupCut),
			member(groupSnapshot("grp"), "vol-a"), member(groupSnapshot("grp"), "vol-b")),
		wantActions: []string{
			"patch volumegroupsnapshotcontents groupsnapcontent-uid-grp",
			"delete volumesnapshots " + vsA, "delete volumesnapshots " + vsB,
			"patch volumegroupsnapshots grp",
		},
		check: func(t *testing.T, e *env) {
			gc, err := e.snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(context.Background(), "groupsnapcontent-uid-grp", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("Retain content: %v", err)
			}
			if gc.Annotations[snapapi.AnnGroupBeingDeleted] != "yes" {
				t.Errorf("content annotations = %v, want %s", gc.Annotations, snapapi.AnnGroupBeingDeleted)
			}
		},
	}, {
		name: "deleted once its Delete content is gone: only the finalizer removed",
		objs: objs(groupSnapshot("grp", withGroupClass("group-gold"), groupBound, groupDeleting)),
		wantActions: []string{
			"patch volumegroupsnapshots grp",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.objs...)
			err := e.ctrl.syncGroupSnapshotKey(context.Background(), ns+"/grp")
			if (err != nil) != tt.wantErr {
				t.Fatalf("sync error = %v, want error: %t", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantActions, e.actions()); diff != "" {
				t.Errorf("API requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantEvents, e.eventList()); diff != "" {
				t.Errorf("Events (-want +got):\n%s", diff)
			}
			if tt.check != nil {
				tt.check(t, e)
			}
		})
	}
}

func memberBoundReady(content string) func(*snapv1.VolumeSnapshot) {
	return func(vs *snapv1.VolumeSnapshot) {
		ready, group := true, "grp"
		created := metav1.Unix(1700000000, 0)
		vs.Status = &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &content, ReadyToUse: &ready,
			VolumeGroupSnapshotName: &group, CreationTime: &created, RestoreSize: resourceQuantity(1 << 30)}
	}
}

func memberContent(name, vs, handle string) *snapv1.VolumeSnapshotContent {
	ready, size, created := true, int64(1<<30), int64(1700000000)*1e9
	group := "group-1"
	vol := "vol"
	return &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{upstreamGroupHandleAnn: group},
			Finalizers: []string{snapapi.ContentBoundFinalizer}},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: v1.ObjectReference{Namespace: ns, Name: vs, UID: types.UID("uid-" + vs)},
			Source:            snapv1.VolumeSnapshotContentSource{VolumeHandle: &vol},
			DeletionPolicy:    snapv1.VolumeSnapshotContentDelete, Driver: driver,
		},
		Status: &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, VolumeGroupSnapshotHandle: &group,
			ReadyToUse: &ready, RestoreSize: &size, CreationTime: &created},
	}
}

func TestSyncGroupMember(t *testing.T) {
	gs := groupSnapshot("grp", withGroupClass("group-gold"), groupBound)
	vsA, vscA := memberNames(gs, "vol-a")
	tests := []struct {
		name        string
		objs        []runtime.Object
		wantErr     bool
		wantActions []string
		wantEvents  []string
	}{{
		name:        "a ready member in step with its content: no request, no class looked for",
		objs:        []runtime.Object{gs, member(gs, "vol-a", memberBoundReady(vscA)), memberContent(vscA, vsA, "snap-a")},
		wantActions: nil,
	}, {
		name:    "a member deleted on its own while its group lives: refused",
		objs:    []runtime.Object{gs, member(gs, "vol-a", memberBoundReady(vscA), deleting), memberContent(vscA, vsA, "snap-a")},
		wantErr: true, wantEvents: []string{"Warning SnapshotDeletePending"},
	}, {
		name: "a member deleted with its group: content marked and deleted, finalizers kept until the content is gone",
		objs: []runtime.Object{groupSnapshot("grp", withGroupClass("group-gold"), groupBound, groupDeleting),
			member(gs, "vol-a", memberBoundReady(vscA), deleting, func(vs *snapv1.VolumeSnapshot) {
				vs.Finalizers = []string{snapapi.SnapshotInGroupFinalizer, snapapi.SnapshotBoundFinalizer}
			}), memberContent(vscA, vsA, "snap-a")},
		wantActions: []string{
			"patch volumesnapshotcontents " + vscA, "delete volumesnapshotcontents " + vscA,
		},
	}, {
		name: "a member deleted with its group, its content gone: both finalizers go in one patch",
		objs: []runtime.Object{groupSnapshot("grp", withGroupClass("group-gold"), groupBound, groupDeleting),
			member(gs, "vol-a", memberBoundReady(vscA), deleting, func(vs *snapv1.VolumeSnapshot) {
				vs.Finalizers = []string{snapapi.SnapshotInGroupFinalizer, snapapi.SnapshotBoundFinalizer}
			})},
		wantActions: []string{"patch volumesnapshots " + vsA},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.objs...)
			err := e.ctrl.syncSnapshotKey(context.Background(), ns+"/"+vsA)
			if (err != nil) != tt.wantErr {
				t.Fatalf("sync error = %v, want error: %t", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantActions, e.actions()); diff != "" {
				t.Errorf("API requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantEvents, e.eventList()); diff != "" {
				t.Errorf("Events (-want +got):\n%s", diff)
			}
		})
	}
}

func (e *env) groupSnapshot(name string) *groupv1.VolumeGroupSnapshot {
	e.t.Helper()
	gs, err := e.snap.GroupsnapshotV1().VolumeGroupSnapshots(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return gs
}
