package handler

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/stowage-csi/stowage/attacher/internal/testutil"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
)

func mountCap(fsType string, mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

func wantPublishes(t *testing.T, f *testutil.FakeCSI, want *csi.ControllerPublishVolumeRequest) {
	t.Helper()
	sharedtestutil.WantRequest(t, "ControllerPublish", f.Publishes, want)
}

func wantFinalizer(t *testing.T, va *storagev1.VolumeAttachment, want bool) {
	t.Helper()
	has := false
	for _, f := range va.Finalizers {
		if f == FinalizerName(va.Spec.Attacher) {
			has = true
		}
	}
	if has != want {
		t.Errorf("finalizers = %v, want ours present = %v", va.Finalizers, want)
	}
}

func wantAnnotation(t *testing.T, va *storagev1.VolumeAttachment, key, value string) {
	t.Helper()
	if got := va.Annotations[key]; got != value {
		t.Errorf("annotation %s = %q, want %q", key, got, value)
	}
}

// noCode stands for an error that carries no gRPC code.
const noCode = codes.Code(1 << 31)

// wantError checks a VolumeError is set with the given gRPC code, or without one for noCode.
func wantError(t *testing.T, got *storagev1.VolumeError, code codes.Code) {
	t.Helper()
	if got == nil || got.Message == "" || got.Time.IsZero() {
		t.Fatalf("error status = %+v, want message and time", got)
	}
	if code == noCode {
		if got.ErrorCode != nil {
			t.Errorf("errorCode = %d, want none", *got.ErrorCode)
		}
		return
	}
	if got.ErrorCode == nil || codes.Code(*got.ErrorCode) != code {
		t.Errorf("errorCode = %v, want %d", got.ErrorCode, code)
	}
}
