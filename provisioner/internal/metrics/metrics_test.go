package metrics

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A failed attempt counts in *_failed_total only: upstream times successes alone, so a dashboard's latency
// quantiles are those of volumes that were really provisioned or deleted.
func TestFailedAttemptsAreCountedNotTimed(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	start := time.Now()
	m.Provisioned("gp3", "", start, errors.New("CreateVolume failed"))
	m.Provisioned("gp3", "", start, nil)
	m.Deleted("gp3", start, errors.New("DeleteVolume failed"))
	m.Deleted("gp3", start, errors.New("DeleteVolume failed"))

	for name, want := range map[string]int{
		"controller_persistentvolumeclaim_provision_failed_total":     1,
		"controller_persistentvolumeclaim_provision_total":            1,
		"controller_persistentvolumeclaim_provision_duration_seconds": 1,
		"controller_persistentvolume_delete_failed_total":             1,
		// No successful delete: neither the counter nor the histogram has a series.
		"controller_persistentvolume_delete_total":            0,
		"controller_persistentvolume_delete_duration_seconds": 0,
	} {
		if got := testutil.CollectAndCount(reg, name); got != want {
			t.Errorf("%s: %d series, want %d", name, got, want)
		}
	}
	if got := testutil.ToFloat64(m.deleteFailed.WithLabelValues("gp3")); got != 2 {
		t.Errorf("delete failures counted %v, want 2", got)
	}
	var hist int
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "controller_persistentvolumeclaim_provision_duration_seconds" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 1 {
			t.Errorf("provision duration observed %d attempts, want the 1 success", h.GetSampleCount())
		}
		for i, b := range h.GetBucket() {
			if b.GetUpperBound() != prometheus.DefBuckets[i] {
				t.Errorf("bucket %d bound %v, want upstream's %v", i, b.GetUpperBound(), prometheus.DefBuckets[i])
			}
		}
		hist++
	}
	if hist != 1 {
		t.Fatalf("provision duration histogram gathered %d times, want 1", hist)
	}
}
