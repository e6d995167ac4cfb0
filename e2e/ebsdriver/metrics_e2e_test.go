//go:build e2e

package ebsdriver

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
	"github.com/stowage-csi/stowage/e2e/metricsparity"
	"github.com/stowage-csi/stowage/e2e/rig"
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

// upstreamNode is what upstream's node serves, from its NVMe collector, on an instance with instanceID.
// The per-volume families exist only for EBS NVMe devices behind the kubelet's CSI mounts, which Nitro
// instances have and this machine does not: they are in the test's Optional, and compare where present.
func upstreamNode(instanceID string) metricsparity.Shape {
	collector := metricsparity.Family{Type: "COUNTER", LabelSets: []string{"instance_id"},
		Values: map[string][]string{"instance_id": {instanceID}}}
	shape := metricsparity.Shape{
		"aws_ebs_csi_nvme_collector_scrapes_total": collector,
		"aws_ebs_csi_nvme_collector_errors_total":  collector,
		"aws_ebs_csi_nvme_collector_duration_seconds": {Type: "HISTOGRAM", LabelSets: []string{"instance_id"},
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
			Values:  map[string][]string{"instance_id": {instanceID}}},
	}
	for name, typ := range perVolumeFamilies() {
		if typ != "HISTOGRAM" {
			shape[name] = metricsparity.Family{Type: typ, LabelSets: []string{"instance_id,volume_id"}}
		}
	}
	return shape
}

// perVolumeFamilies are upstream's per-volume NVMe families and their types.
func perVolumeFamilies() map[string]string {
	families := map[string]string{"aws_ebs_csi_volume_queue_length": "GAUGE",
		"aws_ebs_csi_read_io_latency_seconds": "HISTOGRAM", "aws_ebs_csi_write_io_latency_seconds": "HISTOGRAM"}
	for _, c := range []string{"read_ops", "write_ops", "read_bytes", "write_bytes", "read_seconds", "write_seconds",
		"exceeded_iops_seconds", "exceeded_tp_seconds", "ec2_exceeded_iops_seconds", "ec2_exceeded_tp_seconds"} {
		families["aws_ebs_csi_"+c+"_total"] = "COUNTER"
	}
	return families
}

// TestE2EEBSNodeMetricsParity runs ebs-plugin in node mode on the emulator's instance metadata and requires
// upstream's node metrics on --http-endpoint: the NVMe collector's own series, labelled with the instance ID.
func TestE2EEBSNodeMetricsParity(t *testing.T) {
	const instanceID = "i-0e0e0e0e0e0e0e0e0"
	sim, linkDir := startSim(t, 0.01, []ec2sim.Instance{{ID: instanceID, Zone: testZone, Type: "m5.large"}})
	p := startPlugin(t, buildPlugin(t), pluginEnv(t, sim, instanceID, false), "node", "--metadata-sources=imds", "--device-link-dir="+linkDir)
	ctx := testContext(t, time.Minute)

	got := metricsparity.Scrape(t, ctx, "http://"+p.metrics+"/metrics")
	optional := map[string]string{}
	for name, typ := range perVolumeFamilies() {
		optional[name] = "only for EBS NVMe devices behind CSI mounts (Nitro instances)"
		if typ == "HISTOGRAM" {
			optional[name] += "; its bucket bounds are the device's latency bins"
		}
	}
	metricsparity.Check(t, got, upstreamNode(instanceID), metricsparity.Options{
		Values:   []string{"instance_id"},
		Optional: optional,
		Extra: map[string]string{
			"go_*":      "the Go collector",
			"process_*": "the process collector",
			// Stowage's recorder makes the EC2 latency series of every operation in each mode; upstream's
			// node makes none, having no EC2 client.
			"aws_ebs_csi_api_request_duration_seconds": "served at zero on the node",
		},
	})
	// A second scrape: no EBS device on this machine, so no volume series and no error, and both scrapes
	// counted.
	_, body := rig.Get(t, ctx, "http://"+p.metrics+"/metrics")
	for _, want := range []string{
		`aws_ebs_csi_nvme_collector_errors_total{instance_id="` + instanceID + `"} 0`,
		`aws_ebs_csi_nvme_collector_scrapes_total{instance_id="` + instanceID + `"} 2`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Fatalf("second scrape lacks %s:\n%s", want, body)
		}
	}
}
