package controller

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

var (
	bothFinalizers = []string{snapapi.SnapshotAsSourceFinalizer, snapapi.SnapshotBoundFinalizer}
	apiGroup       = snapv1.GroupName
)

func TestSyncSnapshot(t *testing.T) {
	tests := []struct {
		name        string
		objs        []runtime.Object
		snapshot    string
		wantErr     bool
		wantActions []string
		wantEvents  []string
		check       func(t *testing.T, e *env)
	}{{
		name: "dynamic snapshot: finalizers in one patch, claim protected, content created bound with its finalizer, snapshot bound",
		objs: []runtime.Object{
			claim("data", "pv-1"), volume("pv-1", "data", "vol-1"),
			class("gold", snapv1.VolumeSnapshotContentDelete, func(c *snapv1.VolumeSnapshotClass) {
				c.Parameters = map[string]string{
					snapapi.ParamSnapshotterSecretName:      "${volumesnapshot.name}-secret",
					snapapi.ParamSnapshotterSecretNamespace: "${volumesnapshot.namespace}",
				}
			}),
			snapshotOf("snap", "data", withClass("gold")),
		},
		snapshot: "snap",
		wantActions: []string{
			"patch volumesnapshots snap",
			"update persistentvolumeclaims data",
			"get persistentvolumes pv-1",
			"create volumesnapshotcontents snapcontent-uid-snap",
			"patch volumesnapshots/status snap",
		},
		wantEvents: []string{"Normal CreatingSnapshot"},
		check: func(t *testing.T, e *env) {
			vs := e.snapshot("snap")
			if diff := cmp.Diff(bothFinalizers, vs.Finalizers); diff != "" {
				t.Errorf("snapshot finalizers (-want +got):\n%s", diff)
			}
			if vs.Status == nil || vs.Status.BoundVolumeSnapshotContentName == nil || *vs.Status.BoundVolumeSnapshotContentName != "snapcontent-uid-snap" ||
				vs.Status.ReadyToUse == nil || *vs.Status.ReadyToUse {
				t.Errorf("snapshot status = %+v, want bound to snapcontent-uid-snap, not ready", vs.Status)
			}
			c := e.content("snapcontent-uid-snap")
			mode := v1.PersistentVolumeFilesystem
			want := snapv1.VolumeSnapshotContentSpec{
				VolumeSnapshotRef: v1.ObjectReference{Kind: "VolumeSnapshot", APIVersion: "snapshot.storage.k8s.io/v1",
					Namespace: ns, Name: "snap", UID: "uid-snap", ResourceVersion: c.Spec.VolumeSnapshotRef.ResourceVersion},
				Source:                  snapv1.VolumeSnapshotContentSource{VolumeHandle: new("vol-1")},
				VolumeSnapshotClassName: new("gold"),
				DeletionPolicy:          snapv1.VolumeSnapshotContentDelete,
				Driver:                  driver,
				SourceVolumeMode:        &mode,
			}
			if diff := cmp.Diff(want, c.Spec); diff != "" {
				t.Errorf("content spec (-want +got):\n%s", diff)
			}
			if c.Spec.VolumeSnapshotRef.ResourceVersion == "" {
				t.Error("content's volumeSnapshotRef has no resourceVersion")
			}
			wantAnn := map[string]string{snapapi.AnnDeletionSecretName: "snap-secret", snapapi.AnnDeletionSecretNamespace: ns}
			if diff := cmp.Diff(wantAnn, c.Annotations); diff != "" {
				t.Errorf("content annotations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{snapapi.ContentBoundFinalizer}, c.Finalizers); diff != "" {
				t.Errorf("content finalizers (-want +got):\n%s", diff)
			}
			if pvc, _ := e.kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), "data", metav1.GetOptions{}); !slices.Contains(pvc.Finalizers, snapapi.PVCAsSourceFinalizer) {
				t.Errorf("claim finalizers = %v, want %s", pvc.Finalizers, snapapi.PVCAsSourceFinalizer)
			}
			// Every write is preconditioned: the finalizer patch carries the version the snapshot was read at.
			md, _ := e.patchBody("volumesnapshots", 0)["metadata"].(map[string]any)
			if md["resourceVersion"] == nil {
				t.Errorf("finalizer patch %v has no resourceVersion precondition", md)
			}
		},
	}, {
		name: "Retain class: only the as-source finalizer",
		objs: []runtime.Object{
			claim("data", "pv-1"), volume("pv-1", "data", "vol-1"),
			class("keep", snapv1.VolumeSnapshotContentRetain), snapshotOf("snap", "data", withClass("keep")),
		},
		snapshot: "snap",
		wantActions: []string{
			"patch volumesnapshots snap", "update persistentvolumeclaims data", "get persistentvolumes pv-1",
			"create volumesnapshotcontents snapcontent-uid-snap", "patch volumesnapshots/status snap",
		},
		wantEvents: []string{"Normal CreatingSnapshot"},
		check: func(t *testing.T, e *env) {
			if diff := cmp.Diff([]string{snapapi.SnapshotAsSourceFinalizer}, e.snapshot("snap").Finalizers); diff != "" {
				t.Errorf("finalizers (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "no class named: the driver's one default class is recorded, the claim's volume read once",
		objs: []runtime.Object{
			claim("data", "pv-1"), volume("pv-1", "data", "vol-1"),
			class("gold", snapv1.VolumeSnapshotContentDelete, isDefault),
			class("other-driver", snapv1.VolumeSnapshotContentDelete, isDefault, func(c *snapv1.VolumeSnapshotClass) { c.Driver = "other" }),
			snapshotOf("snap", "data"),
		},
		snapshot: "snap",
		wantActions: []string{
			"get persistentvolumes pv-1", "patch volumesnapshots snap", "patch volumesnapshots snap",
			"update persistentvolumeclaims data", "create volumesnapshotcontents snapcontent-uid-snap", "patch volumesnapshots/status snap",
		},
		wantEvents: []string{"Normal CreatingSnapshot"},
		check: func(t *testing.T, e *env) {
			if got := e.snapshot("snap").Spec.VolumeSnapshotClassName; got == nil || *got != "gold" {
				t.Errorf("class = %v, want gold", got)
			}
		},
	}, {
		name: "two default classes for the driver: error in status and an Event, nothing created",
		objs: []runtime.Object{
			claim("data", "pv-1"), volume("pv-1", "data", "vol-1"),
			class("a", snapv1.VolumeSnapshotContentDelete, isDefault), class("b", snapv1.VolumeSnapshotContentDelete, isDefault),
			snapshotOf("snap", "data"),
		},
		snapshot:    "snap",
		wantErr:     true,
		wantActions: []string{"get persistentvolumes pv-1", "patch volumesnapshots/status snap"},
		wantEvents:  []string{"Warning SetDefaultSnapshotClassFailed"},
		check: func(t *testing.T, e *env) {
			st := e.snapshot("snap").Status
			if st == nil || st.Error == nil || *st.Error.Message != "Failed to set default snapshot class with error 2 default snapshot classes were found" {
				t.Errorf("status = %+v, want the default class error", st)
			}
		},
	}, {
		name: "claim not bound yet: claim protected, content creation fails into status, retried",
		objs: []runtime.Object{
			claim("data", "", func(p *v1.PersistentVolumeClaim) { p.Status.Phase = v1.ClaimPending }),
			class("gold", snapv1.VolumeSnapshotContentDelete), snapshotOf("snap", "data", withClass("gold")),
		},
		snapshot:    "snap",
		wantErr:     true,
		wantActions: []string{"patch volumesnapshots snap", "update persistentvolumeclaims data", "patch volumesnapshots/status snap"},
		wantEvents:  []string{"Warning SnapshotContentCreationFailed"},
	}, {
		name: "content ready: status copied in one patch, SnapshotCreated and SnapshotReady",
		objs: []runtime.Object{
			claim("data", "pv-1"), class("gold", snapv1.VolumeSnapshotContentDelete),
			snapshotOf("snap", "data", withClass("gold"), withFinalizers(bothFinalizers...), boundTo("snapcontent-uid-snap", false)),
			dynContent("snap", "vol-1", snapv1.VolumeSnapshotContentDelete, readyStatus(1<<30, 1700000000000000000)),
		},
		snapshot:    "snap",
		wantActions: []string{"patch volumesnapshots/status snap"},
		wantEvents:  []string{"Normal SnapshotCreated", "Normal SnapshotReady"},
		check: func(t *testing.T, e *env) {
			st := e.snapshot("snap").Status
			if st == nil || !*st.ReadyToUse || st.RestoreSize == nil || st.RestoreSize.Value() != 1<<30 || st.CreationTime == nil ||
				st.CreationTime.UnixNano() != 1700000000000000000 {
				t.Errorf("status = %+v, want ready, 1Gi, created at 1700000000 s", st)
			}
		},
	}, {
		name: "ready snapshot: the claim's finalizer goes, nothing else is written",
		objs: []runtime.Object{
			claim("data", "pv-1", func(p *v1.PersistentVolumeClaim) { p.Finalizers = []string{snapapi.PVCAsSourceFinalizer} }),
			class("gold", snapv1.VolumeSnapshotContentDelete),
			snapshotOf("snap", "data", withClass("gold"), withFinalizers(bothFinalizers...), func(vs *snapv1.VolumeSnapshot) {
				boundTo("snapcontent-uid-snap", true)(vs)
				vs.Status.CreationTime = &metav1.Time{}
				vs.Status.RestoreSize = resourceQuantity(1 << 30)
			}),
			dynContent("snap", "vol-1", snapv1.VolumeSnapshotContentDelete, readyStatus(1<<30, 0)),
		},
		snapshot:    "snap",
		wantActions: []string{"update persistentvolumeclaims data"},
	}, {
		name: "claim kept while another snapshot of it is not ready",
		objs: []runtime.Object{
			claim("data", "pv-1", func(p *v1.PersistentVolumeClaim) { p.Finalizers = []string{snapapi.PVCAsSourceFinalizer} }),
			class("gold", snapv1.VolumeSnapshotContentDelete),
			snapshotOf("snap", "data", withClass("gold"), withFinalizers(bothFinalizers...), boundTo("snapcontent-uid-snap", true)),
			snapshotOf("other", "data", withClass("gold"), withFinalizers(bothFinalizers...), boundTo("snapcontent-uid-other", false)),
			dynContent("snap", "vol-1", snapv1.VolumeSnapshotContentDelete, readyStatus(1<<30, 0)),
		},
		snapshot:    "snap",
		wantActions: []string{"patch volumesnapshots/status snap"},
		wantEvents:  []string{"Normal SnapshotCreated"},
	}, {
		name: "pre-provisioned: the content's ref gets the snapshot's UID, then the snapshot is bound and ready",
		objs: []runtime.Object{
			&snapv1.VolumeSnapshot{
				ObjectMeta: metav1.ObjectMeta{Name: "pre", Namespace: ns, UID: "uid-pre"},
				Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: new("pre-content")}},
			},
			&snapv1.VolumeSnapshotContent{
				ObjectMeta: metav1.ObjectMeta{Name: "pre-content"},
				Spec: snapv1.VolumeSnapshotContentSpec{
					VolumeSnapshotRef: v1.ObjectReference{Namespace: ns, Name: "pre"},
					Source:            snapv1.VolumeSnapshotContentSource{SnapshotHandle: new("snap-9")},
					DeletionPolicy:    snapv1.VolumeSnapshotContentRetain, Driver: driver,
				},
				Status: &snapv1.VolumeSnapshotContentStatus{ReadyToUse: new(true), RestoreSize: new(int64(5))},
			},
		},
		snapshot:    "pre",
		wantActions: []string{"patch volumesnapshots pre", "patch volumesnapshotcontents pre-content", "patch volumesnapshots/status pre"},
		wantEvents:  []string{"Normal SnapshotReady"},
		check: func(t *testing.T, e *env) {
			if uid := e.content("pre-content").Spec.VolumeSnapshotRef.UID; uid != "uid-pre" {
				t.Errorf("content ref UID = %q, want uid-pre", uid)
			}
			if diff := cmp.Diff([]string{snapapi.SnapshotAsSourceFinalizer}, e.snapshot("pre").Finalizers); diff != "" {
				t.Errorf("Retain content: finalizers (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "pre-provisioned content pointing at another snapshot: misbound, nothing bound",
		objs: []runtime.Object{
			&snapv1.VolumeSnapshot{
				ObjectMeta: metav1.ObjectMeta{Name: "pre", Namespace: ns, UID: "uid-pre", Finalizers: []string{snapapi.SnapshotAsSourceFinalizer}},
				Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: new("pre-content")}},
			},
			&snapv1.VolumeSnapshotContent{
				ObjectMeta: metav1.ObjectMeta{Name: "pre-content"},
				Spec: snapv1.VolumeSnapshotContentSpec{
					VolumeSnapshotRef: v1.ObjectReference{Namespace: ns, Name: "someone-else"},
					Source:            snapv1.VolumeSnapshotContentSource{SnapshotHandle: new("snap-9")},
					DeletionPolicy:    snapv1.VolumeSnapshotContentRetain, Driver: driver,
				},
			},
		},
		snapshot:    "pre",
		wantErr:     true,
		wantActions: []string{"patch volumesnapshots/status pre"},
		wantEvents:  []string{"Warning SnapshotContentMisbound"},
	}, {
		name: "both sources set: validation error",
		objs: []runtime.Object{
			snapshotOf("bad", "data", func(vs *snapv1.VolumeSnapshot) { vs.Spec.Source.VolumeSnapshotContentName = new("x") }),
		},
		snapshot:    "bad",
		wantErr:     true,
		wantActions: []string{"patch volumesnapshots/status bad"},
		wantEvents:  []string{"Warning SnapshotValidationError"},
	}, {
		name: "deleted, policy Delete: content marked and deleted, the snapshot's finalizers kept until the content is gone",
		objs: []runtime.Object{
			class("gold", snapv1.VolumeSnapshotContentDelete),
			snapshotOf("snap", "data", withClass("gold"), withFinalizers(bothFinalizers...), boundTo("snapcontent-uid-snap", true), deleting),
			dynContent("snap", "vol-1", snapv1.VolumeSnapshotContentDelete, readyStatus(1, 1)),
		},
		snapshot: "snap",
		wantActions: []string{
			"patch volumesnapshotcontents snapcontent-uid-snap", "delete volumesnapshotcontents snapcontent-uid-snap",
		},
		check: func(t *testing.T, e *env) {
			if _, err := e.snap.SnapshotV1().VolumeSnapshotContents().Get(context.Background(), "snapcontent-uid-snap", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("content still there: %v", err)
			}
			if ann := e.patchBody("volumesnapshotcontents", 0)["metadata"].(map[string]any)["annotations"]; !cmp.Equal(ann, map[string]any{snapapi.AnnBeingDeleted: "yes"}) {
				t.Errorf("content annotation patch = %v", ann)
			}
			if diff := cmp.Diff(bothFinalizers, e.snapshot("snap").Finalizers); diff != "" {
				t.Errorf("finalizers (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "deleted, content gone: both finalizers go in one patch",
		objs: []runtime.Object{
			snapshotOf("snap", "data", withClass("gold"), withFinalizers(bothFinalizers...), boundTo("snapcontent-uid-snap", true), deleting),
		},
		snapshot:    "snap",
		wantActions: []string{"patch volumesnapshots snap"},
		check: func(t *testing.T, e *env) {
			if f := e.snapshot("snap").Finalizers; len(f) != 0 {
				t.Errorf("finalizers = %v, want none", f)
			}
		},
	}, {
		name: "deleted, policy Retain: content marked and kept, both finalizers go",
		objs: []runtime.Object{
			snapshotOf("snap", "data", withClass("keep"), withFinalizers(snapapi.SnapshotAsSourceFinalizer), boundTo("snapcontent-uid-snap", true), deleting),
			dynContent("snap", "vol-1", snapv1.VolumeSnapshotContentRetain, readyStatus(1, 1)),
		},
		snapshot:    "snap",
		wantActions: []string{"patch volumesnapshotcontents snapcontent-uid-snap", "patch volumesnapshots snap"},
		check: func(t *testing.T, e *env) {
			if c := e.content("snapcontent-uid-snap"); c.DeletionTimestamp != nil || c.Annotations[snapapi.AnnBeingDeleted] != "yes" {
				t.Errorf("content = %+v, want kept and marked", c.ObjectMeta)
			}
		},
	}, {
		name: "deleted while a claim is being restored from it: nothing written, retried",
		objs: []runtime.Object{
			claim("restored", "", func(p *v1.PersistentVolumeClaim) {
				p.Status.Phase = v1.ClaimPending
				p.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: &apiGroup, Kind: "VolumeSnapshot", Name: "snap"}
			}),
			snapshotOf("snap", "data", withClass("gold"), withFinalizers(bothFinalizers...), boundTo("snapcontent-uid-snap", true), deleting),
			dynContent("snap", "vol-1", snapv1.VolumeSnapshotContentDelete, readyStatus(1, 1)),
		},
		snapshot:   "snap",
		wantErr:    true,
		wantEvents: []string{"Warning SnapshotDeletePending"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.objs...)
			err := e.ctrl.syncSnapshotKey(context.Background(), ns+"/"+tt.snapshot)
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

// A stale cache costs one 409 and one re-read, never a loop of full-object Updates.
func TestConflictRereadsOnce(t *testing.T) {
	e := newEnv(t, claim("data", "pv-1"), volume("pv-1", "data", "vol-1"), class("gold", snapv1.VolumeSnapshotContentDelete),
		snapshotOf("snap", "data", withClass("gold")))
	conflicts := 1
	e.snap.PrependReactor("patch", "volumesnapshots", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "" && conflicts > 0 {
			conflicts--
			_, _, _ = e.record(a) // this reactor runs before the logging one and ends the chain
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: apiGroup, Resource: "volumesnapshots"}, "snap", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	if err := e.ctrl.syncSnapshotKey(context.Background(), ns+"/snap"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"patch volumesnapshots snap", "get volumesnapshots snap", "patch volumesnapshots snap",
		"update persistentvolumeclaims data", "get persistentvolumes pv-1",
		"create volumesnapshotcontents snapcontent-uid-snap", "patch volumesnapshots/status snap",
	}
	if diff := cmp.Diff(want, e.actions()); diff != "" {
		t.Errorf("API requests (-want +got):\n%s", diff)
	}
}

func TestSyncContent(t *testing.T) {
	tests := []struct {
		name        string
		objs        []runtime.Object
		wantActions []string
		wantEvents  []string
		wantErr     bool
	}{{
		name:        "bound content without its finalizer gets it",
		objs:        []runtime.Object{dynContent("snap", "vol-1", snapv1.VolumeSnapshotContentDelete, func(c *snapv1.VolumeSnapshotContent) { c.Finalizers = nil })},
		wantActions: []string{"patch volumesnapshotcontents snapcontent-uid-snap"},
	}, {
		name: "unbound pre-provisioned content is left alone",
		objs: []runtime.Object{dynContent("snap", "vol-1", snapv1.VolumeSnapshotContentDelete, func(c *snapv1.VolumeSnapshotContent) {
			c.Finalizers, c.Spec.VolumeSnapshotRef.UID = nil, ""
		})},
	}, {
		name: "its snapshot is being deleted: marked being-deleted",
		objs: []runtime.Object{
			dynContent("snap", "vol-1", snapv1.VolumeSnapshotContentDelete),
			snapshotOf("snap", "data", withFinalizers(bothFinalizers...), deleting),
		},
		wantActions: []string{"patch volumesnapshotcontents snapcontent-uid-snap"},
	}, {
		name: "both handles set: validation error",
		objs: []runtime.Object{dynContent("snap", "vol-1", snapv1.VolumeSnapshotContentDelete, func(c *snapv1.VolumeSnapshotContent) {
			c.Spec.Source.SnapshotHandle = new("s")
		})},
		wantEvents: []string{"Warning ContentValidationError"},
		wantErr:    true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.objs...)
			err := e.ctrl.syncContentKey(context.Background(), "snapcontent-uid-snap")
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
