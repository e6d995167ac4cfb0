package expand

import (
	"slices"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stowage-csi/stowage/resizer/internal/testutil"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
)

const gi = int64(1) << 30

func mustQ(s string) resource.Quantity { return resource.MustParse(s) }

func expandReq(bytes int64) *csi.ControllerExpandVolumeRequest {
	return &csi.ControllerExpandVolumeRequest{
		VolumeId:      "vol-1",
		CapacityRange: &csi.CapacityRange{RequiredBytes: bytes},
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
	}
}

func TestExpand(t *testing.T) {
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "expand-creds"}, Data: map[string][]byte{"key": []byte("value")}}
	tests := []struct {
		name    string
		opts    envOpts
		csi     *testutil.FakeCSI
		objs    []runtime.Object
		wantErr bool
		// wantAgain is the delay Sync asks for (0: none).
		wantAgain   time.Duration
		wantActions []string
		// wantExpand is what ControllerExpandVolume received; nil means not called.
		wantExpand *csi.ControllerExpandVolumeRequest
		wantEvents []string
		check      func(t *testing.T, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume)
	}{
		{
			name: "controller expansion with node expansion: three preconditioned writes and the node handoff",
			csi:  &testutil.FakeCSI{NodeExpansion: true},
			objs: []runtime.Object{testutil.PVC("c1", "pv1", "2Gi", "1Gi"), testutil.PV("pv1", "vol-1", "1Gi", "c1")},
			wantActions: []string{
				"patch persistentvolumeclaims/status c1",
				"patch persistentvolumes pv1",
				"patch persistentvolumeclaims/status c1",
			},
			wantExpand: expandReq(2 * gi),
			wantEvents: []string{"Normal Resizing", "Normal FileSystemResizeRequired"},
			check: func(t *testing.T, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) {
				wantState(t, pvc, "2Gi", v1.PersistentVolumeClaimNodeResizePending)
				wantConditions(t, pvc, v1.PersistentVolumeClaimFileSystemResizePending)
				wantCapacity(t, "claim", pvc.Status.Capacity, "1Gi")
				wantCapacity(t, "volume", pv.Spec.Capacity, "2Gi")
				if got := pv.Annotations[PreResizeCapacityAnnotation]; got != "1Gi" {
					t.Errorf("PV annotation %s = %q, want 1Gi", PreResizeCapacityAnnotation, got)
				}
			},
		},
		{
			name:        "controller-only expansion finishes the claim and tells the kubelet node expansion is not required",
			csi:         &testutil.FakeCSI{ExpandBytes: 3 * gi},
			objs:        []runtime.Object{testutil.PVC("c1", "pv1", "2Gi", "1Gi"), testutil.PV("pv1", "vol-1", "1Gi", "c1")},
			wantActions: []string{"patch persistentvolumeclaims/status c1", "patch persistentvolumes pv1", "patch persistentvolumeclaims/status c1"},
			wantExpand:  expandReq(2 * gi),
			wantEvents:  []string{"Normal Resizing", "Normal VolumeResizeSuccessful"},
			check: func(t *testing.T, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) {
				wantCapacity(t, "claim", pvc.Status.Capacity, "3Gi")
				wantCapacity(t, "volume", pv.Spec.Capacity, "3Gi")
				wantConditions(t, pvc)
				if _, ok := pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage]; ok {
					t.Errorf("allocatedResourceStatuses = %v, want no storage entry", pvc.Status.AllocatedResourceStatuses)
				}
				if pvc.Annotations[NodeExpansionNotRequiredAnnotation] != "true" {
					t.Errorf("claim annotations = %v, want %s", pvc.Annotations, NodeExpansionNotRequiredAnnotation)
				}
				if _, ok := pv.Annotations[PreResizeCapacityAnnotation]; ok {
					t.Errorf("PV annotations = %v, want no pre-resize capacity", pv.Annotations)
				}
			},
		},
		{
			name:        "trivial resizer: no CSI call, the node expands",
			opts:        envOpts{trivial: true},
			objs:        []runtime.Object{testutil.PVC("c1", "pv1", "2Gi", "1Gi"), testutil.PV("pv1", "vol-1", "1Gi", "c1")},
			wantActions: []string{"patch persistentvolumeclaims/status c1", "patch persistentvolumes pv1", "patch persistentvolumeclaims/status c1"},
			wantEvents:  []string{"Normal Resizing", "Normal FileSystemResizeRequired"},
			check: func(t *testing.T, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) {
				wantState(t, pvc, "2Gi", v1.PersistentVolumeClaimNodeResizePending)
				wantCapacity(t, "volume", pv.Spec.Capacity, "2Gi")
			},
		},
		{
			name: "controller-expand secret is read with a direct GET and sent",
			csi:  &testutil.FakeCSI{NodeExpansion: true},
			objs: []runtime.Object{testutil.PVC("c1", "pv1", "2Gi", "1Gi"), secret, testutil.PV("pv1", "vol-1", "1Gi", "c1", func(pv *v1.PersistentVolume) {
				pv.Spec.CSI.ControllerExpandSecretRef = &v1.SecretReference{Namespace: "kube-system", Name: "expand-creds"}
			})},
			wantActions: []string{"patch persistentvolumeclaims/status c1", "get secrets expand-creds", "patch persistentvolumes pv1", "patch persistentvolumeclaims/status c1"},
			wantExpand: func() *csi.ControllerExpandVolumeRequest {
				r := expandReq(2 * gi)
				r.Secrets = map[string]string{"key": "value"}
				return r
			}(),
			wantEvents: []string{"Normal Resizing", "Normal FileSystemResizeRequired"},
		},
		{
			name:        "infeasible size: Infeasible state, a Warning, and a retry only after --retry-interval-max",
			csi:         &testutil.FakeCSI{ExpandErr: status.Error(codes.OutOfRange, "too big")},
			objs:        []runtime.Object{testutil.PVC("c1", "pv1", "100Gi", "1Gi"), testutil.PV("pv1", "vol-1", "1Gi", "c1")},
			wantAgain:   testutil.RetryMax,
			wantActions: []string{"patch persistentvolumeclaims/status c1", "patch persistentvolumeclaims/status c1"},
			wantExpand:  expandReq(100 * gi),
			wantEvents:  []string{"Normal Resizing", "Warning VolumeResizeFailed"},
			check: func(t *testing.T, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) {
				wantState(t, pvc, "100Gi", v1.PersistentVolumeClaimControllerResizeInfeasible)
				wantConditions(t, pvc, v1.PersistentVolumeClaimControllerResizeError)
				wantCapacity(t, "volume", pv.Spec.Capacity, "1Gi")
			},
		},
		{
			name:        "final error that is not infeasible: error condition, state stays in progress, backoff",
			csi:         &testutil.FakeCSI{ExpandErr: status.Error(codes.Internal, "boom")},
			objs:        []runtime.Object{testutil.PVC("c1", "pv1", "2Gi", "1Gi"), testutil.PV("pv1", "vol-1", "1Gi", "c1")},
			wantErr:     true,
			wantActions: []string{"patch persistentvolumeclaims/status c1", "patch persistentvolumeclaims/status c1"},
			wantExpand:  expandReq(2 * gi),
			wantEvents:  []string{"Normal Resizing", "Warning VolumeResizeFailed"},
			check: func(t *testing.T, pvc *v1.PersistentVolumeClaim, _ *v1.PersistentVolume) {
				wantState(t, pvc, "2Gi", v1.PersistentVolumeClaimControllerResizeInProgress)
				wantConditions(t, pvc, v1.PersistentVolumeClaimControllerResizeError)
			},
		},
		{
			name:        "uncertain error (timeout): one status write, the state says a call may be running",
			csi:         &testutil.FakeCSI{ExpandErr: status.Error(codes.DeadlineExceeded, "slow")},
			objs:        []runtime.Object{testutil.PVC("c1", "pv1", "2Gi", "1Gi"), testutil.PV("pv1", "vol-1", "1Gi", "c1")},
			wantErr:     true,
			wantActions: []string{"patch persistentvolumeclaims/status c1"},
			wantExpand:  expandReq(2 * gi),
			wantEvents:  []string{"Normal Resizing", "Warning VolumeResizeFailed"},
			check: func(t *testing.T, pvc *v1.PersistentVolumeClaim, _ *v1.PersistentVolume) {
				wantState(t, pvc, "2Gi", v1.PersistentVolumeClaimControllerResizeInProgress)
			},
		},
		{
			name: "recovery: the user shrank the request after an infeasible one, the smaller size is expanded",
			csi:  &testutil.FakeCSI{NodeExpansion: true},
			objs: []runtime.Object{
				testutil.PVC("c1", "pv1", "2Gi", "1Gi", resizeState("100Gi", v1.PersistentVolumeClaimControllerResizeInfeasible)),
				testutil.PV("pv1", "vol-1", "1Gi", "c1"),
			},
			wantActions: []string{"patch persistentvolumeclaims/status c1", "patch persistentvolumes pv1", "patch persistentvolumeclaims/status c1"},
			wantExpand:  expandReq(2 * gi),
			wantEvents:  []string{"Normal Resizing", "Normal FileSystemResizeRequired"},
			check: func(t *testing.T, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) {
				wantState(t, pvc, "2Gi", v1.PersistentVolumeClaimNodeResizePending)
				wantCapacity(t, "volume", pv.Spec.Capacity, "2Gi")
			},
		},
		{
			name: "an expansion that may still be running is finished at its size before a smaller request is served",
			csi:  &testutil.FakeCSI{NodeExpansion: true},
			objs: []runtime.Object{
				testutil.PVC("c1", "pv1", "2Gi", "1Gi", resizeState("10Gi", v1.PersistentVolumeClaimControllerResizeInProgress)),
				testutil.PV("pv1", "vol-1", "1Gi", "c1"),
			},
			// allocatedResources already says 10Gi: no write before the call.
			wantActions: []string{"patch persistentvolumes pv1", "patch persistentvolumeclaims/status c1"},
			wantExpand:  expandReq(10 * gi),
			wantEvents:  []string{"Normal Resizing", "Normal FileSystemResizeRequired"},
		},
		{
			name: "node expansion pending: a spurious sync does nothing",
			objs: []runtime.Object{
				testutil.PVC("c1", "pv1", "2Gi", "1Gi", resizeState("2Gi", v1.PersistentVolumeClaimNodeResizePending)),
				testutil.PV("pv1", "vol-1", "2Gi", "c1"),
			},
		},
		{
			name: "node expansion done: the pre-resize capacity annotation is removed",
			objs: []runtime.Object{
				testutil.PVC("c1", "pv1", "2Gi", "2Gi"),
				testutil.PV("pv1", "vol-1", "2Gi", "c1", func(pv *v1.PersistentVolume) {
					pv.Annotations = map[string]string{PreResizeCapacityAnnotation: "1Gi"}
				}),
			},
			wantActions: []string{"patch persistentvolumes pv1"},
			check: func(t *testing.T, _ *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) {
				if _, ok := pv.Annotations[PreResizeCapacityAnnotation]; ok {
					t.Errorf("PV annotations = %v, want the pre-resize capacity gone", pv.Annotations)
				}
			},
		},
		{
			name: "volume of another driver is left alone",
			objs: []runtime.Object{testutil.PVC("c1", "pv1", "2Gi", "1Gi"), testutil.PV("pv1", "vol-1", "1Gi", "c1", func(pv *v1.PersistentVolume) {
				pv.Spec.CSI.Driver = "other.example.com"
			})},
		},
		{
			name: "volume bound to another claim (same name, other UID) is left alone",
			objs: []runtime.Object{testutil.PVC("c1", "pv1", "2Gi", "1Gi"), testutil.PV("pv1", "vol-1", "1Gi", "c1", func(pv *v1.PersistentVolume) {
				pv.Spec.ClaimRef.UID = "someone-else"
			})},
		},
		{
			name: "claim that is not bound is left alone",
			objs: []runtime.Object{testutil.PVC("c1", "pv1", "2Gi", "1Gi", func(p *v1.PersistentVolumeClaim) { p.Status.Phase = v1.ClaimPending }), testutil.PV("pv1", "vol-1", "1Gi", "c1")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts, tc.csi, tc.objs...)
			again, err := e.sync(t, "c1")
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
			wantExpands(t, e.CSI, tc.wantExpand)
			if got := testutil.Events(e.Events); !slices.Equal(got, tc.wantEvents) {
				t.Errorf("Events = %q, want %q", got, tc.wantEvents)
			}
			if tc.check != nil {
				tc.check(t, e.PVC(t, "c1"), e.PV(t, "pv1"))
			}
		})
	}
}

// An infeasible size is not tried again before --retry-interval-max, with no write and no Event, but a new
// request from the user is served at once.
func TestInfeasibleWaitsUntilTheUserChangesTheRequest(t *testing.T) {
	fake := &testutil.FakeCSI{ExpandErr: status.Error(codes.InvalidArgument, "no")}
	e := newEnv(t, envOpts{}, fake, testutil.PVC("c1", "pv1", "100Gi", "1Gi"), testutil.PV("pv1", "vol-1", "1Gi", "c1"))
	if again, err := e.sync(t, "c1"); err != nil || again != testutil.RetryMax {
		t.Fatalf("first Sync = %s, %v; want %s, nil", again, err, testutil.RetryMax)
	}
	again, err := e.sync(t, "c1")
	if err != nil || again != testutil.RetryMax {
		t.Fatalf("second Sync = %s, %v; want %s, nil", again, err, testutil.RetryMax)
	}
	if got := testutil.Actions(e.Client); len(got) != 0 {
		t.Errorf("second Sync made requests %q, want none", got)
	}
	if len(fake.Expands) != 1 {
		t.Errorf("ControllerExpandVolume called %d times, want 1", len(fake.Expands))
	}

	// The user asks for less: served at once.
	pvc := e.PVC(t, "c1")
	pvc.Spec.Resources.Requests[v1.ResourceStorage] = mustQ("5Gi")
	if _, err := e.Client.CoreV1().PersistentVolumeClaims(testutil.Namespace).Update(t.Context(), pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	fake.ExpandErr = nil
	fake.NodeExpansion = true
	if again, err := e.sync(t, "c1"); err != nil || again != 0 {
		t.Fatalf("Sync after shrinking = %s, %v; want 0, nil", again, err)
	}
	if n := len(fake.Expands); n != 2 || fake.Expands[1].CapacityRange.RequiredBytes != 5*gi {
		t.Errorf("ControllerExpandVolume calls = %v, want a second one for 5Gi", fake.Expands)
	}
	wantState(t, e.PVC(t, "c1"), "5Gi", v1.PersistentVolumeClaimNodeResizePending)
}

// With --handle-volume-inuse-error, a volume the driver refused to expand while in use is not tried again
// while a Pod uses it, and is tried as soon as none does.
func TestInUseVolumeWaitsForItsPod(t *testing.T) {
	fake := &testutil.FakeCSI{ExpandErr: status.Error(codes.FailedPrecondition, "volume in use")}
	used := usedClaims{testutil.Namespace + "/c1": true}
	e := newEnv(t, envOpts{inUse: used}, fake, testutil.PVC("c1", "pv1", "2Gi", "1Gi"), testutil.PV("pv1", "vol-1", "1Gi", "c1"))
	if _, err := e.sync(t, "c1"); err == nil {
		t.Fatal("first Sync succeeded, want the FailedPrecondition")
	}
	if _, err := e.sync(t, "c1"); err == nil {
		t.Fatal("Sync while in use succeeded, want an error")
	}
	if len(fake.Expands) != 1 {
		t.Fatalf("ControllerExpandVolume called %d times while the volume is in use, want 1", len(fake.Expands))
	}
	if got := testutil.Events(e.Events); !slices.Equal(got, []string{"Warning VolumeResizeFailed"}) {
		t.Errorf("Events while in use = %q", got)
	}
	used[testutil.Namespace+"/c1"] = false
	fake.ExpandErr = nil
	if _, err := e.sync(t, "c1"); err != nil {
		t.Fatalf("Sync after the Pod ended: %v", err)
	}
	if len(fake.Expands) != 2 {
		t.Errorf("ControllerExpandVolume called %d times, want 2", len(fake.Expands))
	}
}

func wantExpands(t *testing.T, f *testutil.FakeCSI, want *csi.ControllerExpandVolumeRequest) {
	t.Helper()
	sharedtestutil.WantRequest(t, "ControllerExpandVolume", f.Expands, want)
}

func wantState(t *testing.T, pvc *v1.PersistentVolumeClaim, allocated string, state v1.ClaimResourceStatus) {
	t.Helper()
	wantCapacity(t, "allocatedResources", pvc.Status.AllocatedResources, allocated)
	if got := pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage]; got != state {
		t.Errorf("allocatedResourceStatuses[storage] = %q, want %q", got, state)
	}
}

func wantCapacity(t *testing.T, what string, list v1.ResourceList, want string) {
	t.Helper()
	got := list[v1.ResourceStorage]
	if got.Cmp(mustQ(want)) != 0 {
		t.Errorf("%s storage = %s, want %s", what, got.String(), want)
	}
}

func wantConditions(t *testing.T, pvc *v1.PersistentVolumeClaim, want ...v1.PersistentVolumeClaimConditionType) {
	t.Helper()
	var got []v1.PersistentVolumeClaimConditionType
	for _, c := range pvc.Status.Conditions {
		got = append(got, c.Type)
		if c.LastTransitionTime.IsZero() {
			t.Errorf("condition %s has no lastTransitionTime", c.Type)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("conditions = %v, want %v", got, want)
	}
}

// A claim written by someone else between the read and the resizer's patch (the modify worker, the kubelet)
// costs a 409 and one GET, not a second ControllerExpandVolume.
func TestConflictRereadsTheClaimAndCallsTheDriverOnce(t *testing.T) {
	fake := &testutil.FakeCSI{NodeExpansion: true}
	e := newEnv(t, envOpts{}, fake, testutil.PVC("c1", "pv1", "2Gi", "1Gi"), testutil.PV("pv1", "vol-1", "1Gi", "c1"))
	e.BeforeSync(t)
	stale := e.PVC(t, "c1")
	fresh := stale.DeepCopy()
	fresh.Labels = map[string]string{"touched": "by someone else"}
	if _, err := e.Client.CoreV1().PersistentVolumeClaims(testutil.Namespace).Update(t.Context(), fresh, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Client.ClearActions()
	if _, err := e.handler.Sync(t.Context(), stale); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	want := []string{
		"patch persistentvolumeclaims/status c1", // 409
		"get persistentvolumeclaims c1",
		"patch persistentvolumeclaims/status c1",
		"patch persistentvolumes pv1",
		"patch persistentvolumeclaims/status c1",
	}
	if got := testutil.Actions(e.Client); !slices.Equal(got, want) {
		t.Errorf("API requests = %q, want %q", got, want)
	}
	if len(fake.Expands) != 1 {
		t.Errorf("ControllerExpandVolume called %d times, want 1", len(fake.Expands))
	}
	pvc := e.PVC(t, "c1")
	wantState(t, pvc, "2Gi", v1.PersistentVolumeClaimNodeResizePending)
	if pvc.Labels["touched"] == "" {
		t.Error("the other writer's change was lost")
	}
}
