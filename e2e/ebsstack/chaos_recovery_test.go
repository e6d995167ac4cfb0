package ebsstack

import (
	"slices"
	"testing"
	"time"
)

func TestParseOpsKeepsWorkLinesOnly(t *testing.T) {
	log := `I1126 17:59:16.064535    1617 attach.go:81] "Attached" volumeID="vol-1" nodeID="i-1"
I1126 17:59:16.100000    1617 driver.go:223] "CSI response" method="/csi.v1.Identity/Probe" response={"ready":{"value":true}}
I1126 17:59:16.200000    1617 driver.go:223] "CSI response" method="/csi.v1.Node/NodeStageVolume" response={}
  continued="a multi-line value"
E1126 17:59:16.300000    1617 driver.go:221] "CSI request failed" method="/csi.v1.Controller/CreateVolume" err="throttled"
=== /bin/csi-attacher --v=2
I1126 17:59:17.000000    1700 leaderelection.go:1] "Attempting to acquire the lease"
I1126 17:59:18.250000    1700 provision.go:204] "Provisioned volume" pv="pvc-1" volumeID="vol-2"
`
	got := parseOps(log, 2026)
	at := func(sec, us int) time.Time { return time.Date(2026, 11, 26, 17, 59, sec, us*1000, time.Local) }
	want := []logOp{{at(16, 64535), "Attached"}, {at(16, 200000), "NodeStageVolume"}, {at(18, 250000), "Provisioned volume"}}
	if !slices.EqualFunc(got, want, func(a, b logOp) bool { return a.at.Equal(b.at) && a.op == b.op }) {
		t.Errorf("parseOps = %v, want %v", got, want)
	}
}

func TestRecoveriesTakeTheFirstOperationInTheKillsWindow(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 18, 0, 0, 0, time.Local)
	s := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	kills := []KillRecord{
		{Target: "csi-attacher", Phase: 0, At: s(1), Dead: s(1.01)},
		{Target: "csi-attacher", Phase: 0, At: s(5), Dead: s(5.01)},
		{Target: "ebs-plugin-controller", Phase: 0, At: s(2), Dead: s(2.01)},
		{Target: "ebs-plugin-controller", Phase: 1, At: s(30), Dead: s(30.01)},
	}
	phaseEnds := []time.Time{s(20), s(60)}
	ops := map[string][]logOp{
		// The killed process's own last line is before its death; the successor's is 3.5 s after the kill.
		"csi-attacher": {{s(1.005), "Attached"}, {s(4.5), "Attached"}, {s(21), "Detached"}},
		// After the first kill the controller had nothing to do until the next phase: not measured.
		"ebs-plugin-controller": {{s(25), "CreateSnapshot"}, {s(30.5), "CreateSnapshot"}},
	}
	got := recoveries(kills, phaseEnds, ops)
	want := []struct {
		measured bool
		took     time.Duration
		op       string
	}{
		{true, 3500 * time.Millisecond, "Attached"},
		{false, 0, ""}, // the next operation is after its phase
		{false, 0, ""},
		{true, 500 * time.Millisecond, "CreateSnapshot"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d recoveries, want %d", len(got), len(want))
	}
	for i, w := range want {
		if g := got[i]; g.Measured != w.measured || g.Took != w.took || g.Op != w.op || g.Kill != kills[i] {
			t.Errorf("kill %d (%s at %s): got %+v, want measured %v, %s, %q", i, kills[i].Target, kills[i].At.Sub(t0), g, w.measured, w.took, w.op)
		}
	}
}
