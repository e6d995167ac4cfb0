package opmetrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestOperations(t *testing.T) {
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	m.now = func() time.Time { return now }

	m.Start(CreateSnapshot, "a", "", Dynamic) // driver not known at the first sync
	m.Start(CreateSnapshot, "a", "csi.example.com", Dynamic)
	m.Start(CreateSnapshotAndReady, "a", "csi.example.com", Dynamic)
	m.Start(CreateSnapshotAndReady, "b", "csi.example.com", PreProvisioned)
	if got := testutil.ToFloat64(m.inFlight); got != 3 {
		t.Errorf("in flight = %v, want 3", got)
	}
	now = now.Add(2 * time.Second)
	m.Record(CreateSnapshot, "a", StatusSuccess, "")
	m.Record(CreateSnapshot, "a", StatusSuccess, "") // closed already: no second observation
	// Deleting b while its creation is open cancels the creation.
	m.Start(DeleteSnapshot, "b", "csi.example.com", PreProvisioned)
	now = now.Add(time.Second)
	m.Record(DeleteSnapshot, "b", StatusSuccess, "csi.example.com")
	// A group snapshot: created and ready; another one deleted before it was ready cancels its creations, and a
	// snapshot's deletion does not touch a group's operations under the same UID.
	m.Start(CreateGroupSnapshot, "g", "csi.example.com", Dynamic)
	m.Start(CreateGroupSnapshotAndReady, "g", "csi.example.com", Dynamic)
	m.Record(CreateGroupSnapshot, "g", StatusSuccess, "csi.example.com")
	m.Record(CreateGroupSnapshotAndReady, "g", StatusSuccess, "csi.example.com")
	m.Start(CreateGroupSnapshot, "h", "group.example.com", Dynamic)
	m.Start(CreateGroupSnapshotAndReady, "h", "group.example.com", Dynamic)
	m.Start(DeleteSnapshot, "h", "group.example.com", Dynamic)
	m.Record(DeleteSnapshot, "h", StatusSuccess, "")
	m.Start(DeleteGroupSnapshot, "h", "group.example.com", Dynamic)
	m.Record(DeleteGroupSnapshot, "h", StatusSuccess, "")

	want := `
# HELP snapshot_controller_operations_in_flight Total number of operations in flight
# TYPE snapshot_controller_operations_in_flight gauge
snapshot_controller_operations_in_flight 1
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "snapshot_controller_operations_in_flight"); err != nil {
		t.Error(err)
	}
	counts := map[string]int{}
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetName() != "snapshot_controller_operation_total_seconds" {
			continue
		}
		for _, metric := range mf.GetMetric() {
			var labels []string
			for _, l := range metric.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			counts[strings.Join(labels, ",")] = int(metric.GetHistogram().GetSampleCount())
		}
	}
	wantCounts := map[string]int{
		"csi.example.com,CreateSnapshot,success,dynamic":                1,
		"csi.example.com,DeleteSnapshot,success,pre-provisioned":        1,
		"csi.example.com,CreateSnapshotAndReady,cancel,pre-provisioned": 1,
		"csi.example.com,CreateGroupSnapshot,success,dynamic":           1,
		"csi.example.com,CreateGroupSnapshotAndReady,success,dynamic":   1,
		"group.example.com,DeleteSnapshot,success,dynamic":              1,
		"group.example.com,DeleteGroupSnapshot,success,dynamic":         1,
		"group.example.com,CreateGroupSnapshot,cancel,dynamic":          1,
		"group.example.com,CreateGroupSnapshotAndReady,cancel,dynamic":  1,
	}
	for k, v := range wantCounts {
		if counts[k] != v {
			t.Errorf("observations of %s = %d, want %d (all: %v)", k, counts[k], v, counts)
		}
	}
	if len(counts) != len(wantCounts) {
		t.Errorf("series = %v, want %v", counts, wantCounts)
	}
	// Only the controller's own metrics and the process start time: no Go, workqueue or leader election metrics.
	for name := range names {
		if name != "snapshot_controller_operation_total_seconds" && name != "snapshot_controller_operations_in_flight" && name != "process_start_time_seconds" {
			t.Errorf("unexpected metric %s", name)
		}
	}
}
