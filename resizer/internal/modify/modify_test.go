package modify

import (
	"slices"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/stowage-csi/stowage/resizer/internal/slow"
	"github.com/stowage-csi/stowage/resizer/internal/testutil"
)

type env struct {
	*testutil.Env
	handler *Handler
}

func newEnv(t *testing.T, extra bool, fakeCSI *testutil.FakeCSI, objs ...runtime.Object) *env {
	t.Helper()
	e := &env{Env: testutil.NewEnv(fakeCSI, objs...)}
	vacs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range objs {
		if vac, ok := o.(*storagev1.VolumeAttributesClass); ok {
			_ = vacs.Add(vac)
		}
	}
	e.handler = New(Config{
		Driver: testutil.Driver, Client: e.Client, CSI: e.CSI, Events: e.Events, ExtraMetadata: extra,
		PVLister:  e.PVLister(),
		VACLister: storagelisters.NewVolumeAttributesClassLister(vacs),
		Slow:      slow.New(testutil.RetryMax, func() time.Time { return testutil.Now }),
		Now:       func() time.Time { return testutil.Now },
	})
	return e
}

// sync runs the handler on claim c1, with the actions list and Events emptied first.
func (e *env) sync(t *testing.T) (time.Duration, error) {
	t.Helper()
	pvc := e.pvc(t)
	return e.handler.Sync(e.BeforeSync(t), pvc)
}

func (e *env) pvc(t *testing.T) *v1.PersistentVolumeClaim { return e.PVC(t, "c1") }

func (e *env) pv(t *testing.T) *v1.PersistentVolume { return e.PV(t, "pv1") }

func ptr[T any](v T) *T { return &v }

// classes sets the claim's spec class and current class ("" for none) and its modifyVolumeStatus.
func classes(spec, current string, mvs *v1.ModifyVolumeStatus) func(*v1.PersistentVolumeClaim) {
	return func(p *v1.PersistentVolumeClaim) {
		if spec != "" {
			p.Spec.VolumeAttributesClassName = ptr(spec)
		}
		if current != "" {
			p.Status.CurrentVolumeAttributesClassName = ptr(current)
		}
		p.Status.ModifyVolumeStatus = mvs
	}
}

func TestModify(t *testing.T) {
	gold := testutil.VAC("gold", map[string]string{"iops": "6000"})
	silver := testutil.VAC("silver", map[string]string{"iops": "3000"})
	pv := func() *v1.PersistentVolume { return testutil.PV("pv1", "vol-1", "1Gi", "c1") }
	tests := []struct {
		name        string
		extra       bool
		csi         *testutil.FakeCSI
		objs        []runtime.Object
		wantErr     bool
		wantAgain   time.Duration
		wantActions []string
		wantModify  *csi.ControllerModifyVolumeRequest
		wantEvents  []string
		check       func(t *testing.T, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume)
	}{
		{
			name:        "first class: InProgress, ControllerModifyVolume, then the volume and the claim record it",
			extra:       true,
			objs:        []runtime.Object{testutil.PVC("c1", "pv1", "1Gi", "1Gi", classes("gold", "", nil)), pv(), gold},
			wantActions: []string{"patch persistentvolumeclaims/status c1", "patch persistentvolumes pv1", "patch persistentvolumeclaims/status c1"},
			wantModify: &csi.ControllerModifyVolumeRequest{VolumeId: "vol-1", MutableParameters: map[string]string{
				"iops": "6000", PVCNameKey: "c1", PVCNamespaceKey: testutil.Namespace, PVNameKey: "pv1",
			}},
			wantEvents: []string{"Normal VolumeModify", "Normal VolumeModifySuccessful"},
			check: func(t *testing.T, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) {
				if got := ptrString(pvc.Status.CurrentVolumeAttributesClassName); got != "gold" {
					t.Errorf("currentVolumeAttributesClassName = %q, want gold", got)
				}
				if pvc.Status.ModifyVolumeStatus != nil || len(pvc.Status.Conditions) != 0 {
					t.Errorf("status = %+v, want no modifyVolumeStatus and no conditions", pvc.Status)
				}
				if got := ptrString(pv.Spec.VolumeAttributesClassName); got != "gold" {
					t.Errorf("PV volumeAttributesClassName = %q, want gold", got)
				}
			},
		},
		{
			name:        "class change without --extra-modify-metadata sends the class's parameters only",
			objs:        []runtime.Object{testutil.PVC("c1", "pv1", "1Gi", "1Gi", classes("gold", "silver", nil)), pv(), gold, silver},
			wantActions: []string{"patch persistentvolumeclaims/status c1", "patch persistentvolumes pv1", "patch persistentvolumeclaims/status c1"},
			wantModify:  &csi.ControllerModifyVolumeRequest{VolumeId: "vol-1", MutableParameters: map[string]string{"iops": "6000"}},
			wantEvents:  []string{"Normal VolumeModify", "Normal VolumeModifySuccessful"},
		},
		{
			name:        "class that does not exist: Pending, no CSI call",
			objs:        []runtime.Object{testutil.PVC("c1", "pv1", "1Gi", "1Gi", classes("gold", "", nil)), pv()},
			wantActions: []string{"patch persistentvolumeclaims/status c1"},
			check: func(t *testing.T, pvc *v1.PersistentVolumeClaim, _ *v1.PersistentVolume) {
				wantModifyStatus(t, pvc, "gold", v1.PersistentVolumeClaimModifyVolumePending)
			},
		},
		{
			name:        "infeasible class: Infeasible, a Warning, and a retry only after --retry-interval-max",
			csi:         &testutil.FakeCSI{ModifyErr: status.Error(codes.InvalidArgument, "iops out of range")},
			objs:        []runtime.Object{testutil.PVC("c1", "pv1", "1Gi", "1Gi", classes("gold", "silver", nil)), pv(), gold, silver},
			wantAgain:   testutil.RetryMax,
			wantActions: []string{"patch persistentvolumeclaims/status c1", "patch persistentvolumeclaims/status c1"},
			wantModify:  &csi.ControllerModifyVolumeRequest{VolumeId: "vol-1", MutableParameters: map[string]string{"iops": "6000"}},
			wantEvents:  []string{"Normal VolumeModify", "Warning VolumeModifyFailed"},
			check: func(t *testing.T, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) {
				wantModifyStatus(t, pvc, "gold", v1.PersistentVolumeClaimModifyVolumeInfeasible)
				if len(pvc.Status.Conditions) != 1 || pvc.Status.Conditions[0].Type != v1.PersistentVolumeClaimVolumeModifyVolumeError {
					t.Errorf("conditions = %+v, want ModifyVolumeError", pvc.Status.Conditions)
				}
				if pv.Spec.VolumeAttributesClassName != nil {
					t.Errorf("PV class = %q, want unchanged", *pv.Spec.VolumeAttributesClassName)
				}
			},
		},
		{
			name:        "uncertain error: stays InProgress with an error condition, retried with backoff",
			csi:         &testutil.FakeCSI{ModifyErr: status.Error(codes.DeadlineExceeded, "slow")},
			objs:        []runtime.Object{testutil.PVC("c1", "pv1", "1Gi", "1Gi", classes("gold", "silver", nil)), pv(), gold, silver},
			wantErr:     true,
			wantActions: []string{"patch persistentvolumeclaims/status c1", "patch persistentvolumeclaims/status c1"},
			wantModify:  &csi.ControllerModifyVolumeRequest{VolumeId: "vol-1", MutableParameters: map[string]string{"iops": "6000"}},
			wantEvents:  []string{"Normal VolumeModify", "Warning VolumeModifyFailed"},
			check: func(t *testing.T, pvc *v1.PersistentVolumeClaim, _ *v1.PersistentVolume) {
				wantModifyStatus(t, pvc, "gold", v1.PersistentVolumeClaimModifyVolumeInProgress)
			},
		},
		{
			name: "rollback from Infeasible: the status is cleared, the driver is not called",
			objs: []runtime.Object{testutil.PVC("c1", "pv1", "1Gi", "1Gi", classes("silver", "silver",
				&v1.ModifyVolumeStatus{TargetVolumeAttributesClassName: "gold", Status: v1.PersistentVolumeClaimModifyVolumeInfeasible})), pv(), gold, silver},
			wantActions: []string{"patch persistentvolumeclaims/status c1"},
			wantEvents:  []string{"Normal VolumeModifyCanceled"},
			check: func(t *testing.T, pvc *v1.PersistentVolumeClaim, _ *v1.PersistentVolume) {
				if pvc.Status.ModifyVolumeStatus != nil {
					t.Errorf("modifyVolumeStatus = %+v, want none", pvc.Status.ModifyVolumeStatus)
				}
			},
		},
		{
			name: "rollback from InProgress: the current class is applied again, then the status is cleared",
			objs: []runtime.Object{testutil.PVC("c1", "pv1", "1Gi", "1Gi", classes("silver", "silver",
				&v1.ModifyVolumeStatus{TargetVolumeAttributesClassName: "gold", Status: v1.PersistentVolumeClaimModifyVolumeInProgress})), pv(), gold, silver},
			wantActions: []string{"patch persistentvolumeclaims/status c1"},
			wantModify:  &csi.ControllerModifyVolumeRequest{VolumeId: "vol-1", MutableParameters: map[string]string{"iops": "3000"}},
			wantEvents:  []string{"Normal VolumeModifyCanceled"},
		},
		{
			name: "class already applied: nothing",
			objs: []runtime.Object{testutil.PVC("c1", "pv1", "1Gi", "1Gi", classes("gold", "gold", nil)), pv(), gold},
		},
		{
			name: "claim of another driver's volume: nothing",
			objs: []runtime.Object{testutil.PVC("c1", "pv1", "1Gi", "1Gi", classes("gold", "", nil)), gold,
				testutil.PV("pv1", "vol-1", "1Gi", "c1", func(p *v1.PersistentVolume) { p.Spec.CSI.Driver = "other" })},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.extra, tc.csi, tc.objs...)
			again, err := e.sync(t)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Sync error = %v, want error %v", err, tc.wantErr)
			}
			if again != tc.wantAgain {
				t.Errorf("Sync asked to be called again after %s, want %s", again, tc.wantAgain)
			}
			if got := testutil.Actions(e.Client); !slices.Equal(got, tc.wantActions) {
				t.Errorf("API requests = %q, want %q", got, tc.wantActions)
			}
			if bad := testutil.UnguardedPatches(e.Client); len(bad) > 0 {
				t.Errorf("patches without a resourceVersion precondition: %q", bad)
			}
			if tc.wantModify == nil && len(e.CSI.Modifies) != 0 {
				t.Errorf("ControllerModifyVolume called %d times, want 0", len(e.CSI.Modifies))
			}
			if tc.wantModify != nil && (len(e.CSI.Modifies) != 1 || !proto.Equal(e.CSI.Modifies[0], tc.wantModify)) {
				t.Errorf("ControllerModifyVolume requests = %v, want one %v", e.CSI.Modifies, tc.wantModify)
			}
			if got := testutil.Events(e.Events); !slices.Equal(got, tc.wantEvents) {
				t.Errorf("Events = %q, want %q", got, tc.wantEvents)
			}
			if tc.check != nil {
				tc.check(t, e.pvc(t), e.pv(t))
			}
		})
	}
}

// An infeasible class is not tried again before --retry-interval-max, and the cached class's parameters are
// never changed by --extra-modify-metadata.
func TestInfeasibleClassWaits(t *testing.T) {
	gold := testutil.VAC("gold", map[string]string{"iops": "6000"})
	fakeCSI := &testutil.FakeCSI{ModifyErr: status.Error(codes.InvalidArgument, "no")}
	e := newEnv(t, true, fakeCSI, testutil.PVC("c1", "pv1", "1Gi", "1Gi", classes("gold", "", nil)), testutil.PV("pv1", "vol-1", "1Gi", "c1"), gold)
	if again, err := e.sync(t); err != nil || again != testutil.RetryMax {
		t.Fatalf("first Sync = %s, %v", again, err)
	}
	if again, err := e.sync(t); err != nil || again != testutil.RetryMax {
		t.Fatalf("second Sync = %s, %v", again, err)
	}
	if got := testutil.Actions(e.Client); len(got) != 0 {
		t.Errorf("second Sync made requests %q, want none", got)
	}
	if len(fakeCSI.Modifies) != 1 {
		t.Errorf("ControllerModifyVolume called %d times, want 1", len(fakeCSI.Modifies))
	}
	if len(gold.Parameters) != 1 {
		t.Errorf("cached class parameters changed: %v", gold.Parameters)
	}
}

func wantModifyStatus(t *testing.T, pvc *v1.PersistentVolumeClaim, target string, st v1.PersistentVolumeClaimModifyVolumeStatus) {
	t.Helper()
	got := pvc.Status.ModifyVolumeStatus
	if got == nil || got.TargetVolumeAttributesClassName != target || got.Status != st {
		t.Errorf("modifyVolumeStatus = %+v, want %s %s", got, target, st)
	}
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
