package handler

import (
	"context"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stowage-csi/stowage/attacher/internal/testutil"
)

func TestDetach(t *testing.T) {
	stowageAttached := []func(*storagev1.VolumeAttachment){
		withFinalizer, attached, deleting,
		withAnnotations(NodeIDAnnotation, "i-1", VolumeHandleAnnotation, "vol-1"),
	}
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: map[string][]byte{"key": []byte("value")}}
	tests := []struct {
		name          string
		csi           *testutil.FakeCSI
		objs          []runtime.Object
		wantErr       bool
		wantActions   []string
		wantUnpublish *csi.ControllerUnpublishVolumeRequest
		wantFinalizer bool
		check         func(t *testing.T, va *storagev1.VolumeAttachment)
	}{
		{
			name:          "detach is ControllerUnpublish and one finalizer patch, without the PV or the node",
			objs:          []runtime.Object{testutil.VA("va1", "pv1", "node1", stowageAttached...)},
			wantActions:   []string{"patch volumeattachments va1"},
			wantUnpublish: &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1"},
		},
		{
			name: "without our finalizer there is nothing to do",
			objs: []runtime.Object{testutil.VA("va1", "pv1", "node1", deleting, attached)},
		},
		{
			name: "VolumeAttachment attached by upstream is detached through its PersistentVolume",
			objs: []runtime.Object{
				testutil.VA("va1", "pv1", "node1", withFinalizer, attached, deleting, withAnnotations(NodeIDAnnotation, "i-1")),
				testutil.PV("pv1", "vol-1"),
			},
			wantActions:   []string{"patch volumeattachments va1"},
			wantUnpublish: &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1"},
		},
		{
			name: "node ID from the CSINode when the VolumeAttachment has no annotation",
			objs: []runtime.Object{
				testutil.VA("va1", "pv1", "node1", withFinalizer, attached, deleting),
				testutil.PV("pv1", "vol-1"), testutil.CSINode("node1", "i-7"),
			},
			wantActions:   []string{"patch volumeattachments va1"},
			wantUnpublish: &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-7"},
		},
		{
			name: "recorded secret is read for ControllerUnpublish",
			objs: []runtime.Object{
				testutil.VA("va1", "pv1", "node1", append(slices.Clone(stowageAttached), withAnnotations(PublishSecretAnnotation, "ns/creds"))...),
				secret,
			},
			wantActions:   []string{"get secrets creds", "patch volumeattachments va1"},
			wantUnpublish: &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1", Secrets: map[string]string{"key": "value"}},
		},
		{
			name:          "failed ControllerUnpublish keeps the finalizer and records detachError",
			csi:           &testutil.FakeCSI{UnpublishErr: status.Error(codes.Internal, "stuck")},
			objs:          []runtime.Object{testutil.VA("va1", "pv1", "node1", stowageAttached...)},
			wantErr:       true,
			wantActions:   []string{"patch volumeattachments/status va1"},
			wantUnpublish: &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1"},
			wantFinalizer: true,
			check: func(t *testing.T, va *storagev1.VolumeAttachment) {
				wantError(t, va.Status.DetachError, codes.Internal)
			},
		},
		{
			name:          "timeout keeps the finalizer: the volume may still be attached",
			csi:           &testutil.FakeCSI{UnpublishErr: status.Error(codes.DeadlineExceeded, "slow")},
			objs:          []runtime.Object{testutil.VA("va1", "pv1", "node1", stowageAttached...)},
			wantErr:       true,
			wantActions:   []string{"patch volumeattachments/status va1"},
			wantUnpublish: &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1"},
			wantFinalizer: true,
		},
		{
			name:          "NotFound from the driver (volume or node gone) counts as detached",
			csi:           &testutil.FakeCSI{UnpublishErr: status.Error(codes.NotFound, "no such instance")},
			objs:          []runtime.Object{testutil.VA("va1", "pv1", "node1", stowageAttached...)},
			wantActions:   []string{"patch volumeattachments va1"},
			wantUnpublish: &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1"},
		},
		{
			name:          "upstream-attached VolumeAttachment whose PV is gone records detachError",
			objs:          []runtime.Object{testutil.VA("va1", "pv1", "node1", withFinalizer, attached, deleting, withAnnotations(NodeIDAnnotation, "i-1"))},
			wantErr:       true,
			wantActions:   []string{"patch volumeattachments/status va1"},
			wantFinalizer: true,
		},
		{
			name: "other finalizers are kept",
			objs: []runtime.Object{testutil.VA("va1", "pv1", "node1", append([]func(*storagev1.VolumeAttachment){
				func(va *storagev1.VolumeAttachment) { va.Finalizers = []string{"example.com/other"} },
			}, stowageAttached...)...)},
			wantActions:   []string{"patch volumeattachments va1"},
			wantUnpublish: &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1"},
			check: func(t *testing.T, va *storagev1.VolumeAttachment) {
				if !slices.Equal(va.Finalizers, []string{"example.com/other"}) {
					t.Errorf("finalizers = %v, want only example.com/other", va.Finalizers)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv("", Capabilities{}, tc.csi, tc.objs...)
			h := NewCSI(e.cfg)
			va := e.stored(t, tc.objs[0].(*storagev1.VolumeAttachment).Name)
			if _, err := h.SyncVA(testContext(t), va); (err != nil) != tc.wantErr {
				t.Fatalf("SyncVA error = %v, want error %v", err, tc.wantErr)
			}
			if got := testutil.Actions(e.client); !slices.Equal(got, tc.wantActions) {
				t.Errorf("actions = %q, want %q", got, tc.wantActions)
			}
			if tc.wantUnpublish == nil {
				if len(e.csi.Unpublishes) != 0 {
					t.Errorf("ControllerUnpublish called %d times, want 0", len(e.csi.Unpublishes))
				}
			} else if len(e.csi.Unpublishes) != 1 || !proto.Equal(e.csi.Unpublishes[0], tc.wantUnpublish) {
				t.Errorf("ControllerUnpublish calls = %v, want one %v", e.csi.Unpublishes, tc.wantUnpublish)
			}
			got := e.va(t, va.Name)
			wantFinalizer(t, got, tc.wantFinalizer)
			if got.Status.DetachError == nil && got.Status.Attached != va.Status.Attached {
				t.Errorf("status.attached changed to %v; detach must not write it", got.Status.Attached)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// The cached copy a worker sees right after its own write still carries the old state; acting on it
// would repeat ControllerPublish/Unpublish and the writes (kubernetes-csi/external-attacher#587).
func TestStaleCopyIsNotActedOnTwice(t *testing.T) {
	t.Run("attach", func(t *testing.T) {
		e := newEnv("", Capabilities{}, nil, testutil.VA("va1", "pv1", "node1"), testutil.PV("pv1", "vol-1"), testutil.CSINode("node1", "i-1"))
		va := e.stored(t, "va1")
		h := NewCSI(e.cfg)
		ctx := testContext(t)
		if _, err := h.SyncVA(ctx, va); err != nil {
			t.Fatal(err)
		}
		requeue, err := h.SyncVA(ctx, va)
		if err != nil || requeue == 0 {
			t.Fatalf("second sync of the stale copy = %v, %v; want a requeue", requeue, err)
		}
		if len(e.csi.Publishes) != 1 || len(e.client.Actions()) != 2 {
			t.Errorf("publishes = %d, actions = %q; want 1 publish and 2 writes", len(e.csi.Publishes), testutil.Actions(e.client))
		}
		// The fresh copy (what the informer delivers next) is attached: nothing more happens.
		if _, err := h.SyncVA(ctx, e.va(t, "va1")); err != nil {
			t.Fatal(err)
		}
		if len(e.csi.Publishes) != 1 || len(e.client.Actions()) != 3 {
			t.Errorf("after the fresh copy: publishes = %d, actions = %q; want 1 publish and no new write", len(e.csi.Publishes), testutil.Actions(e.client))
		}
	})
	t.Run("detach", func(t *testing.T) {
		e := newEnv("", Capabilities{}, nil, testutil.VA("va1", "pv1", "node1", withFinalizer, attached, deleting, withAnnotations(NodeIDAnnotation, "i-1", VolumeHandleAnnotation, "vol-1")))
		va := e.stored(t, "va1")
		h := NewCSI(e.cfg)
		ctx := testContext(t)
		for range 3 {
			if _, err := h.SyncVA(ctx, va); err != nil {
				t.Fatal(err)
			}
		}
		if len(e.csi.Unpublishes) != 1 {
			t.Errorf("ControllerUnpublish called %d times for one deletion, want 1", len(e.csi.Unpublishes))
		}
		h.Forget(va.Name, va.UID)
	})
}

func TestSyncPVRemovesUpstreamFinalizer(t *testing.T) {
	fin := FinalizerName(testutil.Driver)
	deletingPV := func(pv *v1.PersistentVolume) {
		ts := metav1.NewTime(testNow)
		pv.DeletionTimestamp = &ts
		pv.Finalizers = []string{"kubernetes.io/pv-protection", fin}
	}
	tests := []struct {
		name        string
		objs        []runtime.Object
		wantActions []string
	}{
		{
			name:        "deleted PV with no VolumeAttachment loses the finalizer",
			objs:        []runtime.Object{testutil.PV("pv1", "vol-1", deletingPV)},
			wantActions: []string{"patch persistentvolumes pv1"},
		},
		{
			name: "VolumeAttachment attached by Stowage does not need the PV",
			objs: []runtime.Object{
				testutil.PV("pv1", "vol-1", deletingPV),
				testutil.VA("va1", "pv1", "node1", withFinalizer, withAnnotations(VolumeHandleAnnotation, "vol-1")),
			},
			wantActions: []string{"patch persistentvolumes pv1"},
		},
		{
			name: "VolumeAttachment attached by upstream still needs the PV",
			objs: []runtime.Object{
				testutil.PV("pv1", "vol-1", deletingPV),
				testutil.VA("va1", "pv1", "node1", withFinalizer),
			},
		},
		{
			name: "PV not being deleted keeps it",
			objs: []runtime.Object{testutil.PV("pv1", "vol-1", func(pv *v1.PersistentVolume) { pv.Finalizers = []string{fin} })},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv("", Capabilities{}, nil, tc.objs...)
			pv := e.pv(t, tc.objs[0].(*v1.PersistentVolume).Name)
			e.client.ClearActions()
			if err := NewCSI(e.cfg).SyncPV(testContext(t), pv); err != nil {
				t.Fatal(err)
			}
			if got := testutil.Actions(e.client); !slices.Equal(got, tc.wantActions) {
				t.Errorf("actions = %q, want %q", got, tc.wantActions)
			}
			if len(tc.wantActions) > 0 {
				if got := e.pv(t, "pv1").Finalizers; !slices.Equal(got, []string{"kubernetes.io/pv-protection"}) {
					t.Errorf("finalizers = %v, want only pv-protection", got)
				}
			}
		})
	}
}

// Someone else changing the VolumeAttachment between our read and our write: the attach does not call
// the driver before its intent is recorded, and the detach retries only the finalizer patch.
func TestConcurrentChange(t *testing.T) {
	touch := func(t *testing.T, e *env) {
		t.Helper()
		cur := e.va(t, "va1")
		cur.Labels = map[string]string{"touched": "yes"}
		if _, err := e.client.StorageV1().VolumeAttachments().Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.client.ClearActions()
	}
	t.Run("attach", func(t *testing.T) {
		e := newEnv("", Capabilities{}, nil, testutil.VA("va1", "pv1", "node1"), testutil.PV("pv1", "vol-1"), testutil.CSINode("node1", "i-1"))
		va := e.stored(t, "va1")
		touch(t, e)
		if _, err := NewCSI(e.cfg).SyncVA(testContext(t), va); err == nil {
			t.Fatal("SyncVA with a stale copy succeeded, want a conflict")
		}
		if got, want := testutil.Actions(e.client), []string{"patch volumeattachments va1"}; !slices.Equal(got, want) {
			t.Errorf("actions = %q, want %q", got, want)
		}
		if len(e.csi.Publishes) != 0 {
			t.Errorf("ControllerPublish called %d times before the intent was recorded", len(e.csi.Publishes))
		}
	})
	t.Run("detach", func(t *testing.T) {
		e := newEnv("", Capabilities{}, nil, testutil.VA("va1", "pv1", "node1", withFinalizer, attached, deleting, withAnnotations(NodeIDAnnotation, "i-1", VolumeHandleAnnotation, "vol-1")))
		va := e.stored(t, "va1")
		touch(t, e)
		if _, err := NewCSI(e.cfg).SyncVA(testContext(t), va); err != nil {
			t.Fatal(err)
		}
		want := []string{"patch volumeattachments va1", "get volumeattachments va1", "patch volumeattachments va1"}
		if got := testutil.Actions(e.client); !slices.Equal(got, want) {
			t.Errorf("actions = %q, want %q", got, want)
		}
		if len(e.csi.Unpublishes) != 1 {
			t.Errorf("ControllerUnpublish called %d times, want 1", len(e.csi.Unpublishes))
		}
		got := e.va(t, "va1")
		wantFinalizer(t, got, false)
		if got.Labels["touched"] != "yes" {
			t.Error("the concurrent change was lost")
		}
	})
}
