package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A detach has a series once it has been pending for the threshold, keeps its start across states, and loses
// it when done; the collector counts its scrapes.
func TestDetachTrackerReportsLongPendingDetaches(t *testing.T) {
	now := time.Unix(1000, 0)
	d := newDetachTracker(time.Minute, func() time.Time { return now })
	reg := prometheus.NewRegistry()
	reg.MustRegister(d)
	d.Pending("vol-1", "i-1", "detaching")
	d.Pending("vol-2", "i-1", "detaching")
	now = now.Add(30 * time.Second)
	if n := testutil.CollectAndCount(d, "aws_ebs_csi_ec2_detach_pending_seconds_total"); n != 0 {
		t.Fatalf("%d series before the threshold, want 0", n)
	}
	d.Pending("vol-1", "i-1", "busy")
	d.Done("vol-2", "i-1")
	now = now.Add(45 * time.Second)
	want := `# HELP aws_ebs_csi_ec2_detach_pending_seconds_total Seconds since EC2 accepted a DetachVolume that has not finished, by the attachment's state.
# TYPE aws_ebs_csi_ec2_detach_pending_seconds_total gauge
aws_ebs_csi_ec2_detach_pending_seconds_total{attachment_state="busy",instance_id="i-1",volume_id="vol-1"} 75
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "aws_ebs_csi_ec2_detach_pending_seconds_total"); err != nil {
		t.Error(err)
	}
	d.Done("vol-1", "i-1")
	if n := testutil.CollectAndCount(d, "aws_ebs_csi_ec2_detach_pending_seconds_total"); n != 0 {
		t.Errorf("%d series after the detach finished, want 0", n)
	}
	if got := testutil.ToFloat64(d.scrapes); got != 3 {
		t.Errorf("scrapes = %v, want 3 (one per collection above)", got)
	}
}

// A volume nobody reports on any more (the leader changed) is forgotten instead of reported forever.
func TestDetachTrackerForgetsStaleDetaches(t *testing.T) {
	now := time.Unix(1000, 0)
	d := newDetachTracker(time.Minute, func() time.Time { return now })
	d.Pending("vol-1", "i-1", "detaching")
	now = now.Add(detachForgetAfter + time.Second)
	if n := testutil.CollectAndCount(d, "aws_ebs_csi_ec2_detach_pending_seconds_total"); n != 0 {
		t.Errorf("%d series for a detach not seen for %s, want 0", n, detachForgetAfter)
	}
}
