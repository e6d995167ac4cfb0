//go:build e2e

package ebsdriver

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
	"github.com/stowage-csi/stowage/e2e/rig"
)

// TestE2EEBSUnpublishCancelsStuckPublish: an attachment stuck in "attaching" keeps ControllerPublishVolume
// waiting; ControllerUnpublishVolume for the same volume and node must cancel it, detach, and leave EC2 with
// no attachment, after which a new publish works.
func TestE2EEBSUnpublishCancelsStuckPublish(t *testing.T) {
	d := controllerDriver(t, "i-0571c0000000000aa")
	ctx := testContext(t, 2*time.Minute)
	capability := mountCapability("")
	id := d.createVolume(ctx, volumeRequest("stuck", 1, capability, nil))

	d.sim.SetFaults(ec2sim.Faults{StuckAttach: true})
	published := make(chan error, 1)
	go func() {
		_, err := d.ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: d.instanceID, VolumeCapability: capability})
		published <- err
	}()
	rig.Eventually(t, ctx, 30*time.Second, "the attachment to start", func(context.Context) (bool, error) {
		return d.attachmentState(id) == "attaching", nil
	})
	d.detach(ctx, id)
	select {
	case err := <-published:
		if status.Code(err) != codes.Aborted {
			t.Fatalf("publish ended with %v, want Aborted", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("publish still running after unpublish returned")
	}
	if s := d.attachmentState(id); s != "" {
		t.Fatalf("attachment left in state %q", s)
	}

	d.sim.SetFaults(ec2sim.Faults{})
	if pub := d.attach(ctx, id, capability); pub["devicePath"] == "" {
		t.Fatalf("publish after the cancelled one: no devicePath in %v", pub)
	}
	d.detach(ctx, id)
	d.deleteVolume(ctx, id)
}

// TestE2EEBSThrottlingAndMetrics: with EC2 throttling mutating requests, a lifecycle still completes
// (per-API adaptive retries), and /metrics shows the throttles and request durations with upstream's names.
func TestE2EEBSThrottlingAndMetrics(t *testing.T) {
	d := controllerDriver(t, "i-07a7a7a7a7a7a7a7a")
	ctx := testContext(t, 3*time.Minute)
	// The first three mutating requests are throttled: they are the calls with per-API adaptive retryers, and
	// a fixed count keeps the test deterministic. Describe calls are left alone: they run in the batcher under
	// a 30 s bound per call, and a streak of four or five throttles on one DescribeVolumes sleeps past it (the
	// SDK's backoff grows to 20 s per attempt), which fails that one RPC just as upstream's would; a sidecar
	// retries it, but this test calls each RPC once.
	d.sim.SetFaults(ec2sim.Faults{ThrottleRate: 1, Budget: 3,
		Actions: []string{"CreateVolume", "AttachVolume", "DetachVolume", "DeleteVolume"}})
	capability := mountCapability("")
	id := d.createVolume(ctx, volumeRequest("throttled", 1, capability, nil))
	d.attach(ctx, id, capability)
	d.detach(ctx, id)
	d.deleteVolume(ctx, id)

	_, body := rig.Get(t, ctx, "http://"+d.p.metrics+"/metrics")
	throttles := sumMetric(body, `aws_ebs_csi_api_request_throttles_total\{operation_name="[A-Za-z]+"\} ([0-9.e+]+)`)
	if throttles != 3 {
		t.Errorf("%v throttles counted, want the 3 the emulator sent; metrics:\n%s", throttles, body)
	}
	for _, op := range []string{"CreateVolume", "AttachVolume", "DetachVolume", "DeleteVolume", "DescribeVolumes"} {
		if sumMetric(body, `aws_ebs_csi_api_request_duration_seconds_count\{request="`+op+`"\} ([0-9.e+]+)`) == 0 {
			t.Errorf("no successful %s recorded", op)
		}
	}
	simThrottles := scrapeRequests(t, d.sim.URL()+"/metrics", "code")["RequestLimitExceeded"]
	if throttles != simThrottles {
		t.Errorf("plugin counted %v throttled attempts, the emulator sent %v", throttles, simThrottles)
	}
	t.Logf("throttled attempts: %v", throttles)
}

func sumMetric(text, pattern string) float64 {
	total := 0.0
	for _, m := range regexp.MustCompile(pattern).FindAllStringSubmatch(text, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		total += v
	}
	return total
}
