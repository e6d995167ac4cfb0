package driver

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/cloud"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/testutil"
)

// The real client must keep the method Probe looks for.
var _ reachabilityChecker = (*cloud.Cloud)(nil)

// reachableFake adds the EC2 reachability check to the fake cloud.
type reachableFake struct {
	*testutil.FakeCloud
	err   error
	calls atomic.Int32
}

func (f *reachableFake) CheckReachable(context.Context) error {
	f.calls.Add(1)
	return f.err
}

func TestProbeChecksEC2InControllerModes(t *testing.T) {
	for _, mode := range []Mode{ModeController, ModeAll} {
		t.Run(string(mode), func(t *testing.T) {
			d, fc, _ := newTestDriver(t, Options{Mode: mode})
			rf := &reachableFake{FakeCloud: fc}
			d.cloud = rf
			p, err := d.Probe(context.Background(), nil)
			if err != nil || !p.GetReady().GetValue() || rf.calls.Load() != 1 {
				t.Fatalf("reachable: %v %v, %d checks", p, err, rf.calls.Load())
			}
			rf.err = errors.New("UnauthorizedOperation: You are not authorized")
			_, err = d.Probe(context.Background(), nil)
			wantCode(t, err, codes.Unavailable, "UnauthorizedOperation")
		})
	}
}

func TestProbeInNodeModeNeverCallsEC2(t *testing.T) {
	d, fc, _ := newTestDriver(t, Options{Mode: ModeNode})
	rf := &reachableFake{FakeCloud: fc, err: errors.New("must not be called")}
	d.cloud = rf
	p, err := d.Probe(context.Background(), nil)
	if err != nil || !p.GetReady().GetValue() || rf.calls.Load() != 0 {
		t.Fatalf("node: %v %v, %d checks", p, err, rf.calls.Load())
	}
}
