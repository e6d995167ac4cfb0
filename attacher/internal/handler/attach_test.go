package handler

import (
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stowage-csi/stowage/attacher/internal/testutil"
)

func TestAttach(t *testing.T) {
	const ebs = "ebs.csi.aws.com"
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: map[string][]byte{"key": []byte("value")}}
	tests := []struct {
		name    string
		driver  string
		caps    Capabilities
		csi     *testutil.FakeCSI
		objs    []runtime.Object
		wantErr bool
		// API requests, in order
		wantActions []string
		// what ControllerPublish received; nil means not called
		wantPublish *csi.ControllerPublishVolumeRequest
		// the VolumeAttachment afterwards
		check func(t *testing.T, va *storagev1.VolumeAttachment)
	}{
		{
			name: "first attach is one metadata patch and one status patch",
			csi:  &testutil.FakeCSI{PublishContext: map[string]string{"devicePath": "/dev/xvdba"}},
			objs: []runtime.Object{testutil.VA("va1", "pv1", "node1"), testutil.PV("pv1", "vol-1"), testutil.CSINode("node1", "i-1")},
			wantActions: []string{
				"patch volumeattachments va1",
				"patch volumeattachments/status va1",
			},
			wantPublish: &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1", VolumeCapability: mountCap("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
			check: func(t *testing.T, va *storagev1.VolumeAttachment) {
				wantFinalizer(t, va, true)
				wantAnnotation(t, va, NodeIDAnnotation, "i-1")
				wantAnnotation(t, va, VolumeHandleAnnotation, "vol-1")
				if !va.Status.Attached || va.Status.AttachmentMetadata["devicePath"] != "/dev/xvdba" {
					t.Errorf("status = %+v, want attached with devicePath", va.Status)
				}
			},
		},
		{
			name: "already attached does nothing",
			objs: []runtime.Object{testutil.VA("va1", "pv1", "node1", withFinalizer, attached), testutil.PV("pv1", "vol-1"), testutil.CSINode("node1", "i-1")},
		},
		{
			name: "VolumeAttachment of another driver is ignored",
			objs: []runtime.Object{testutil.VA("va1", "pv1", "node1", func(va *storagev1.VolumeAttachment) { va.Spec.Attacher = "other" }), testutil.PV("pv1", "vol-1")},
		},
		{
			name: "finalizer and annotations present: only the status patch",
			objs: []runtime.Object{
				testutil.VA("va1", "pv1", "node1", withFinalizer, withAnnotations(NodeIDAnnotation, "i-1", VolumeHandleAnnotation, "vol-1")),
				testutil.PV("pv1", "vol-1"), testutil.CSINode("node1", "i-1"),
			},
			wantActions: []string{"patch volumeattachments/status va1"},
			wantPublish: &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1", VolumeCapability: mountCap("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
		},
		{
			name: "controller-publish secret is read and its reference recorded",
			objs: []runtime.Object{
				testutil.VA("va1", "pv1", "node1"),
				testutil.PV("pv1", "vol-1", func(pv *v1.PersistentVolume) {
					pv.Spec.CSI.ControllerPublishSecretRef = &v1.SecretReference{Namespace: "ns", Name: "creds"}
				}),
				testutil.CSINode("node1", "i-1"), secret,
			},
			wantActions: []string{"patch volumeattachments va1", "get secrets creds", "patch volumeattachments/status va1"},
			wantPublish: &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1", Secrets: map[string]string{"key": "value"}, VolumeCapability: mountCap("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
			check: func(t *testing.T, va *storagev1.VolumeAttachment) {
				wantAnnotation(t, va, PublishSecretAnnotation, "ns/creds")
			},
		},
		{
			name:    "final error goes to attachError with its code, finalizer kept",
			csi:     &testutil.FakeCSI{PublishErr: status.Error(codes.InvalidArgument, "bad volume")},
			objs:    []runtime.Object{testutil.VA("va1", "pv1", "node1"), testutil.PV("pv1", "vol-1"), testutil.CSINode("node1", "i-1")},
			wantErr: true,
			wantActions: []string{
				"patch volumeattachments va1",
				"patch volumeattachments/status va1",
			},
			wantPublish: &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1", VolumeCapability: mountCap("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
			check: func(t *testing.T, va *storagev1.VolumeAttachment) {
				wantFinalizer(t, va, true)
				wantError(t, va.Status.AttachError, codes.InvalidArgument)
				if va.Status.Attached {
					t.Error("attached = true after a failed publish")
				}
			},
		},
		{
			name:        "timeout (non-final) is recorded and retried with the finalizer kept",
			csi:         &testutil.FakeCSI{PublishErr: status.Error(codes.DeadlineExceeded, "slow")},
			objs:        []runtime.Object{testutil.VA("va1", "pv1", "node1"), testutil.PV("pv1", "vol-1"), testutil.CSINode("node1", "i-1")},
			wantErr:     true,
			wantActions: []string{"patch volumeattachments va1", "patch volumeattachments/status va1"},
			wantPublish: &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1", VolumeCapability: mountCap("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
			check: func(t *testing.T, va *storagev1.VolumeAttachment) {
				wantFinalizer(t, va, true)
				wantError(t, va.Status.AttachError, codes.DeadlineExceeded)
			},
		},
		{
			name: "a retry failing the same way writes nothing",
			csi:  &testutil.FakeCSI{PublishErr: status.Error(codes.Unavailable, "down")},
			objs: []runtime.Object{
				testutil.VA("va1", "pv1", "node1", withFinalizer, withAnnotations(NodeIDAnnotation, "i-1", VolumeHandleAnnotation, "vol-1"), func(va *storagev1.VolumeAttachment) {
					va.Status.AttachError = &storagev1.VolumeError{Message: "rpc error: code = Unavailable desc = down", ErrorCode: ptr(int32(codes.Unavailable))}
				}),
				testutil.PV("pv1", "vol-1"), testutil.CSINode("node1", "i-1"),
			},
			wantErr:     true,
			wantPublish: &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1", VolumeCapability: mountCap("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
		},
		{
			name:        "missing PersistentVolume is an attachError without a CSI call",
			objs:        []runtime.Object{testutil.VA("va1", "pv1", "node1"), testutil.CSINode("node1", "i-1")},
			wantErr:     true,
			wantActions: []string{"patch volumeattachments/status va1"},
			check: func(t *testing.T, va *storagev1.VolumeAttachment) {
				wantError(t, va.Status.AttachError, noCode)
				wantFinalizer(t, va, false)
			},
		},
		{
			name: "PersistentVolume being deleted: attachError, no finalizer, no CSI call",
			objs: []runtime.Object{testutil.VA("va1", "pv1", "node1"), testutil.PV("pv1", "vol-1", func(pv *v1.PersistentVolume) {
				pv.DeletionTimestamp = &metav1.Time{Time: testNow}
				pv.Finalizers = []string{"kubernetes.io/pv-protection"}
			}), testutil.CSINode("node1", "i-1")},
			wantErr:     true,
			wantActions: []string{"patch volumeattachments/status va1"},
			check: func(t *testing.T, va *storagev1.VolumeAttachment) {
				wantError(t, va.Status.AttachError, noCode)
				if msg := va.Status.AttachError.Message; !strings.Contains(msg, `persistentvolume "pv1" is being deleted`) {
					t.Errorf("attachError = %q, want it to name the PersistentVolume being deleted", msg)
				}
				wantFinalizer(t, va, false)
			},
		},
		{
			name: "PersistentVolume being deleted, retried: nothing written again",
			objs: []runtime.Object{testutil.VA("va1", "pv1", "node1", func(va *storagev1.VolumeAttachment) {
				va.Status.AttachError = &storagev1.VolumeError{Message: `persistentvolume "pv1" is being deleted (metadata.deletionTimestamp is set): refusing to attach it`}
			}), testutil.PV("pv1", "vol-1", func(pv *v1.PersistentVolume) {
				pv.DeletionTimestamp = &metav1.Time{Time: testNow}
				pv.Finalizers = []string{"kubernetes.io/pv-protection"}
			}), testutil.CSINode("node1", "i-1")},
			wantErr: true,
		},
		{
			name:        "no CSINode falls back to the node-id annotation",
			objs:        []runtime.Object{testutil.VA("va1", "pv1", "node1", withAnnotations(NodeIDAnnotation, "i-9")), testutil.PV("pv1", "vol-1")},
			wantActions: []string{"patch volumeattachments va1", "patch volumeattachments/status va1"},
			wantPublish: &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-9", VolumeCapability: mountCap("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
		},
		{
			name:        "no CSINode and no annotation is an attachError",
			objs:        []runtime.Object{testutil.VA("va1", "pv1", "node1"), testutil.PV("pv1", "vol-1")},
			wantErr:     true,
			wantActions: []string{"patch volumeattachments/status va1"},
		},
		{
			name:        "readonly is dropped without PUBLISH_READONLY",
			objs:        []runtime.Object{testutil.VA("va1", "pv1", "node1"), testutil.PV("pv1", "vol-1", func(pv *v1.PersistentVolume) { pv.Spec.CSI.ReadOnly = true }), testutil.CSINode("node1", "i-1")},
			wantActions: []string{"patch volumeattachments va1", "patch volumeattachments/status va1"},
			wantPublish: &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1", VolumeCapability: mountCap("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
		},
		{
			name:        "readonly is passed with PUBLISH_READONLY",
			caps:        Capabilities{PublishReadOnly: true},
			objs:        []runtime.Object{testutil.VA("va1", "pv1", "node1"), testutil.PV("pv1", "vol-1", func(pv *v1.PersistentVolume) { pv.Spec.CSI.ReadOnly = true }), testutil.CSINode("node1", "i-1")},
			wantActions: []string{"patch volumeattachments va1", "patch volumeattachments/status va1"},
			wantPublish: &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1", Readonly: true, VolumeCapability: mountCap("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
		},
		{
			name: "ReadWriteOncePod maps to SINGLE_NODE_SINGLE_WRITER with SINGLE_NODE_MULTI_WRITER",
			caps: Capabilities{SingleNodeMultiWriter: true},
			objs: []runtime.Object{testutil.VA("va1", "pv1", "node1"), testutil.PV("pv1", "vol-1", func(pv *v1.PersistentVolume) {
				pv.Spec.AccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}
			}), testutil.CSINode("node1", "i-1")},
			wantActions: []string{"patch volumeattachments va1", "patch volumeattachments/status va1"},
			wantPublish: &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1", VolumeCapability: mountCap("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER)},
		},
		{
			name: "ReadWriteOncePod maps to SINGLE_NODE_WRITER without SINGLE_NODE_MULTI_WRITER",
			objs: []runtime.Object{testutil.VA("va1", "pv1", "node1"), testutil.PV("pv1", "vol-1", func(pv *v1.PersistentVolume) {
				pv.Spec.AccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}
			}), testutil.CSINode("node1", "i-1")},
			wantActions: []string{"patch volumeattachments va1", "patch volumeattachments/status va1"},
			wantPublish: &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1", VolumeCapability: mountCap("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
		},
		{
			name: "ReadWriteOncePod with another mode is an attachError",
			objs: []runtime.Object{testutil.VA("va1", "pv1", "node1"), testutil.PV("pv1", "vol-1", func(pv *v1.PersistentVolume) {
				pv.Spec.AccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod, v1.ReadWriteOnce}
			}), testutil.CSINode("node1", "i-1")},
			wantErr:     true,
			wantActions: []string{"patch volumeattachments/status va1"},
		},
		{
			name: "block volume, fsType and mount options from the PV",
			objs: []runtime.Object{
				testutil.VA("va1", "pv1", "node1"), testutil.VA("va2", "pv2", "node1"),
				testutil.PV("pv1", "vol-1", func(pv *v1.PersistentVolume) { pv.Spec.VolumeMode = ptr(v1.PersistentVolumeBlock) }),
				testutil.CSINode("node1", "i-1"),
			},
			wantActions: []string{"patch volumeattachments va1", "patch volumeattachments/status va1"},
			wantPublish: &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1", VolumeCapability: &csi.VolumeCapability{
				AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
				AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
			}},
		},
		{
			name: "PV fsType, mount options and volume context win over --default-fstype",
			objs: []runtime.Object{
				testutil.VA("va1", "pv1", "node1"),
				testutil.PV("pv1", "vol-1", func(pv *v1.PersistentVolume) {
					pv.Spec.CSI.FSType = "xfs"
					pv.Spec.CSI.VolumeAttributes = map[string]string{"k": "v"}
					pv.Spec.MountOptions = []string{"noatime"}
				}),
				testutil.CSINode("node1", "i-1"),
			},
			wantActions: []string{"patch volumeattachments va1", "patch volumeattachments/status va1"},
			wantPublish: &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "i-1", VolumeContext: map[string]string{"k": "v"}, VolumeCapability: &csi.VolumeCapability{
				AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "xfs", MountFlags: []string{"noatime"}}},
				AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
			}},
		},
		{
			name:   "in-tree aws-ebs PersistentVolume is migrated",
			driver: ebs,
			objs: []runtime.Object{
				testutil.VA("va1", "pv1", "node1", func(va *storagev1.VolumeAttachment) { va.Spec.Attacher = ebs }),
				&v1.PersistentVolume{
					ObjectMeta: metav1.ObjectMeta{Name: "pv1"},
					Spec: v1.PersistentVolumeSpec{
						AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
						PersistentVolumeSource: v1.PersistentVolumeSource{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://us-east-1a/vol-0abc", FSType: "xfs"}},
					},
				},
				&storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node1"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: ebs, NodeID: "i-1"}}}},
			},
			wantActions: []string{"patch volumeattachments va1", "patch volumeattachments/status va1"},
			wantPublish: &csi.ControllerPublishVolumeRequest{VolumeId: "vol-0abc", NodeId: "i-1", VolumeContext: map[string]string{"partition": "0"}, VolumeCapability: mountCap("xfs", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
			check: func(t *testing.T, va *storagev1.VolumeAttachment) {
				wantAnnotation(t, va, VolumeHandleAnnotation, "vol-0abc")
			},
		},
		{
			name: "inline volume spec is published",
			objs: []runtime.Object{
				testutil.VA("va1", "", "node1", func(va *storagev1.VolumeAttachment) {
					va.Spec.Source = storagev1.VolumeAttachmentSource{InlineVolumeSpec: &testutil.PV("x", "vol-inline").Spec}
				}),
				testutil.CSINode("node1", "i-1"),
			},
			wantActions: []string{"patch volumeattachments va1", "patch volumeattachments/status va1"},
			wantPublish: &csi.ControllerPublishVolumeRequest{VolumeId: "vol-inline", NodeId: "i-1", VolumeCapability: mountCap("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(tc.driver, tc.caps, tc.csi, tc.objs...)
			h := NewCSI(e.cfg)
			va := e.stored(t, tc.objs[0].(*storagev1.VolumeAttachment).Name)
			requeue, err := h.SyncVA(testContext(t), va)
			if (err != nil) != tc.wantErr {
				t.Fatalf("SyncVA error = %v, want error %v", err, tc.wantErr)
			}
			if requeue != 0 {
				t.Errorf("requeue = %v, want 0", requeue)
			}
			if got := testutil.Actions(e.client); !slices.Equal(got, tc.wantActions) {
				t.Errorf("actions = %q, want %q", got, tc.wantActions)
			}
			wantPublishes(t, e.csi, tc.wantPublish)
			if tc.check != nil {
				tc.check(t, e.va(t, va.Name))
			}
		})
	}
}

// With upstream's MutableCSINodeAllocatableCount gate off, the error is recorded without its gRPC code.
func TestAttachErrorCodeOmitted(t *testing.T) {
	e := newEnv("", Capabilities{}, &testutil.FakeCSI{PublishErr: status.Error(codes.ResourceExhausted, "too many volumes")},
		testutil.VA("va1", "pv1", "node1"), testutil.PV("pv1", "vol-1"), testutil.CSINode("node1", "i-1"))
	e.cfg.OmitErrorCode = true
	h := NewCSI(e.cfg)
	if _, err := h.SyncVA(testContext(t), e.stored(t, "va1")); err == nil {
		t.Fatal("SyncVA succeeded, want the publish error")
	}
	va := e.va(t, "va1")
	wantError(t, va.Status.AttachError, noCode)
	if !strings.Contains(va.Status.AttachError.Message, "too many volumes") {
		t.Errorf("attachError = %q, want the driver's message", va.Status.AttachError.Message)
	}
}
