package testutil

import (
	"errors"
	"runtime"
	"sync"
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

func TestAnswerRecordsEveryCallAndAnswersTheCurrentResponseOrError(t *testing.T) {
	var mu sync.Mutex
	var calls []*csi.DeleteSnapshotRequest
	resp := &csi.Snapshot{SnapshotId: "snap-1"}
	var failure error
	first := &csi.DeleteSnapshotRequest{SnapshotId: "a"}
	got, err := Answer(&mu, &calls, first, &resp, &failure)
	if err != nil || got.GetSnapshotId() != "snap-1" {
		t.Fatalf("Answer = %v, %v; want snap-1, nil", got, err)
	}
	failure = errors.New("injected")
	second := &csi.DeleteSnapshotRequest{SnapshotId: "b"}
	if got, err := Answer(&mu, &calls, second, &resp, &failure); got != nil || !errors.Is(err, failure) {
		t.Fatalf("Answer after the error was set = %v, %v; want nil, %v", got, err, failure)
	}
	third := &csi.DeleteSnapshotRequest{SnapshotId: "c"}
	if err := Record(&mu, &calls, third, nil); err != nil {
		t.Fatalf("Record without an error to answer = %v, want nil", err)
	}
	if err := Record(&mu, &calls, third, &failure); !errors.Is(err, failure) {
		t.Fatalf("Record = %v, want %v", err, failure)
	}
	if len(calls) != 4 || calls[0] != first || calls[1] != second || calls[2] != third || calls[3] != third {
		t.Errorf("calls = %v, want the four requests in order", calls)
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
