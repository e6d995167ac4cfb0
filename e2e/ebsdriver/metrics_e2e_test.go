//go:build e2e

package ebsdriver

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
	"github.com/stowage-csi/stowage/e2e/metricsparity"
)

// upstreamController is what upstream's controller serves after a create, attach, detach and delete with
// one throttled attempt, from its metrics package: no peer is built for the EBS driver, so this list stands
// for it. Series of upstream's that need what this scenario cannot give are listed in the test's Optional.
func upstreamController() metricsparity.Shape {
	return metricsparity.Shape{
		"aws_ebs_csi_api_request_duration_seconds": {Type: "HISTOGRAM", LabelSets: []string{"request"},
			// Registered without buckets: Prometheus' default set.
			Buckets: prometheus.DefBuckets,
			// Every known operation has a series from start-up.
			Values: map[string][]string{"request": {"AttachVolume", "CreateSnapshot", "CreateTags", "CreateVolume",
				"DeleteSnapshot", "DeleteTags", "DeleteVolume", "DescribeAvailabilityZones", "DescribeInstances",
				"DescribeSnapshots", "DescribeTags", "DescribeVolumes", "DescribeVolumesModifications", "DetachVolume",
				"EnableFastSnapshotRestores", "ModifyVolume"}}},
		"aws_ebs_csi_api_request_throttles_total":    {Type: "COUNTER", LabelSets: []string{"operation_name"}},
		"aws_ebs_csi_ec2_collector_scrapes_total":    {Type: "COUNTER", LabelSets: []string{""}},
		"aws_ebs_csi_ec2_collector_duration_seconds": {Type: "HISTOGRAM", LabelSets: []string{""}, Buckets: []float64{0.01, 0.1, 0.5, 1, 2.5, 5, 10}},
	}
}

// TestE2EEBSControllerMetricsParity runs ebs-plugin's controller on ec2sim through a volume's life with one
// throttled attempt and requires upstream's controller metrics on --http-endpoint.
func TestE2EEBSControllerMetricsParity(t *testing.T) {
	d := controllerDriver(t, "i-07b7b7b7b7b7b7b7b")
	ctx := testContext(t, 2*time.Minute)
	d.sim.SetFaults(ec2sim.Faults{ThrottleRate: 1, Budget: 1, Actions: []string{"CreateVolume"}})
	capability := mountCapability("")
	id := d.createVolume(ctx, volumeRequest("metrics", 1, capability, nil))
	d.attach(ctx, id, capability)
	d.detach(ctx, id)
	d.deleteVolume(ctx, id)

	got := metricsparity.Scrape(t, ctx, "http://"+d.p.metrics+"/metrics")
	metricsparity.Check(t, got, upstreamController(), metricsparity.Options{
		Values: []string{"request"},
		Optional: map[string]string{
			// An error code EC2 answered; none in this scenario.
			"aws_ebs_csi_api_request_errors_total": "only after an error",
			// Only for a detach pending a minute or more; ec2sim at this time scale detaches at once.
			"aws_ebs_csi_ec2_detach_pending_seconds_total": "only for a long detach",
		},
		Extra: map[string]string{
			// Upstream's EBS registry has no Go or process collector; Stowage's serves them for the usual
			// runtime panels.
			"go_*":      "the Go collector",
			"process_*": "the process collector",
		},
	})
}
