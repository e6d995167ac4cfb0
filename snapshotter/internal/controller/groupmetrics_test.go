package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestGroupSnapshotMetrics: a group snapshot's creation and readiness, and a deletion that cancels a creation
// still open, are observed in snapshot_controller_operation_total_seconds under upstream's group operation
// names, and nothing stays in flight.
func TestGroupSnapshotMetrics(t *testing.T) {
	vsA, vscA := memberName("grp", "vol-a")
	vsB, vscB := memberName("grp", "vol-b")
	objs := append(groupVolumesObjs(), groupClass("group-gold", snapv1.VolumeSnapshotContentDelete, true),
		// grp: cut, members made; its next sync makes it created and ready.
		groupSnapshot("grp", withGroupClass("group-gold"), groupBound),
		dynGroupContent("grp", snapv1.VolumeSnapshotContentDelete, groupCut),
		member(groupSnapshot("grp"), "vol-a", memberBoundReady(vscA)), member(groupSnapshot("grp"), "vol-b", memberBoundReady(vscB)),
		memberContent(vscA, vsA, "snap-a"), memberContent(vscB, vsB, "snap-b"),
		// slow: its content is not cut yet when it is deleted.
		groupSnapshot("slow", withGroupClass("group-gold"), groupBound),
		dynGroupContent("slow", snapv1.VolumeSnapshotContentDelete))
	e := newEnv(t, objs...)
	ctx := context.Background()
	for _, name := range []string{"grp", "slow"} {
		if err := e.ctrl.syncGroupSnapshotKey(ctx, ns+"/"+name); err != nil {
			t.Fatalf("sync %s: %v", name, err)
		}
	}
	slow := e.groupSnapshot("slow")
	now := metav1.Now()
	slow.DeletionTimestamp = &now
	if err := e.ctrl.syncGroupSnapshot(ctx, slow); err != nil {
		t.Fatalf("sync of the deleted group: %v", err)
	}
	e.ctrl.groupSnapshotDeleted(slow)

	want := map[string]int{
		driver + ",CreateGroupSnapshot,success,dynamic":         1,
		driver + ",CreateGroupSnapshotAndReady,success,dynamic": 1,
		driver + ",CreateGroupSnapshot,cancel,dynamic":          1,
		driver + ",CreateGroupSnapshotAndReady,cancel,dynamic":  1,
		driver + ",DeleteGroupSnapshot,success,dynamic":         1,
	}
	if diff := cmp.Diff(want, operationCounts(t, e)); diff != "" {
		t.Errorf("observations by driver,operation,status,type (-want +got):\n%s", diff)
	}
	// grp is ready, slow is gone: nothing in flight.
	wantInFlight := "# HELP snapshot_controller_operations_in_flight Total number of operations in flight\n" +
		"# TYPE snapshot_controller_operations_in_flight gauge\nsnapshot_controller_operations_in_flight 0\n"
	if err := testutil.GatherAndCompare(e.metrics.Gatherer(), strings.NewReader(wantInFlight), "snapshot_controller_operations_in_flight"); err != nil {
		t.Error(err)
	}
}

// operationCounts is the number of observations of each snapshot_controller_operation_total_seconds series,
// keyed by its label values in name order (driver, operation, status, type).
func operationCounts(t *testing.T, e *env) map[string]int {
	t.Helper()
	mfs, err := e.metrics.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, mf := range mfs {
		if mf.GetName() != "snapshot_controller_operation_total_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			counts[strings.Join(labels, ",")] = int(m.GetHistogram().GetSampleCount())
		}
	}
	return counts
}
