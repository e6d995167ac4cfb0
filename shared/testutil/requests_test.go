package testutil

import (
	"runtime"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

func TestWantRequestPassesOnTheRequestsWanted(t *testing.T) {
	req := &csi.ControllerExpandVolumeRequest{VolumeId: "vol-1"}
	WantRequest(t, "ControllerExpandVolume", nil, (*csi.ControllerExpandVolumeRequest)(nil))
	WantRequest(t, "ControllerExpandVolume", []*csi.ControllerExpandVolumeRequest{{VolumeId: "vol-1"}}, req)
}

func TestWantRequestFailsOnOtherRequests(t *testing.T) {
	req := &csi.ControllerExpandVolumeRequest{VolumeId: "vol-1"}
	for _, tc := range []struct {
		name string
		got  []*csi.ControllerExpandVolumeRequest
		want *csi.ControllerExpandVolumeRequest
	}{
		{"a call where none was wanted", []*csi.ControllerExpandVolumeRequest{req}, nil},
		{"no call where one was wanted", nil, req},
		{"two calls", []*csi.ControllerExpandVolumeRequest{req, req}, req},
		{"another request", []*csi.ControllerExpandVolumeRequest{{VolumeId: "vol-2"}}, req},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			// Fatalf ends the goroutine, as it would end the test, so the check runs in one of its own.
			done := make(chan struct{})
			go func() {
				defer close(done)
				WantRequest(rec, "ControllerExpandVolume", tc.got, tc.want)
			}()
			<-done
			if !rec.failed {
				t.Error("WantRequest passed")
			}
		})
	}
}

// recordingTB notes a failure instead of failing the test that runs it.
type recordingTB struct {
	testing.TB
	failed bool
}

func (r *recordingTB) Helper()               {}
func (r *recordingTB) Errorf(string, ...any) { r.failed = true }
func (r *recordingTB) Fatalf(string, ...any) { r.failed = true; runtime.Goexit() }
