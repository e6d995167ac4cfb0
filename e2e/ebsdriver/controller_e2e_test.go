//go:build e2e

package ebsdriver

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

var mountCapability = &csi.VolumeCapability{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}

// TestE2EEBSUnpublishCancelsStuckPublish: an attachment stuck in "attaching" keeps ControllerPublishVolume
// waiting; ControllerUnpublishVolume for the same volume and node must cancel it, detach, and leave EC2 with
// no attachment, after which a new publish works.
func TestE2EEBSUnpublishCancelsStuckPublish(t *testing.T) {
	const instanceID = "i-0571c0000000000aa"
	sim, p := startController(t, instanceID)
	ctl := csi.NewControllerClient(p.conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	vol, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "stuck", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{mountCapability}})
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()
	t.Cleanup(func() { _, _ = ctl.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: id}) })

	sim.SetFaults(ec2sim.Faults{StuckAttach: true})
	published := make(chan error, 1)
	go func() {
		_, err := ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: instanceID, VolumeCapability: mountCapability})
		published <- err
	}()
	waitFor(t, "the attachment to start", func() bool { return attachmentState(sim, id) == "attaching" })
	if _, err := ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: instanceID}); err != nil {
		t.Fatalf("unpublish: %v", err)
	}
	select {
	case err := <-published:
		if status.Code(err) != codes.Aborted {
			t.Fatalf("publish ended with %v, want Aborted", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("publish still running after unpublish returned")
	}
	if s := attachmentState(sim, id); s != "" {
		t.Fatalf("attachment left in state %q", s)
	}

	sim.SetFaults(ec2sim.Faults{})
	pub, err := ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: instanceID, VolumeCapability: mountCapability})
	if err != nil || pub.GetPublishContext()["devicePath"] == "" {
		t.Fatalf("publish after the cancelled one: %v %v", pub, err)
	}
	if _, err := ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: instanceID}); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
}

// TestE2EEBSThrottlingAndMetrics: with EC2 throttling mutating requests, a lifecycle still completes
// (per-API adaptive retries), and /metrics shows the throttles and request durations with upstream's names.
func TestE2EEBSThrottlingAndMetrics(t *testing.T) {
	const instanceID = "i-07a7a7a7a7a7a7a7a"
	sim, p := startController(t, instanceID)
	ctl := csi.NewControllerClient(p.conn)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The first three mutating requests are throttled: they are the calls with per-API adaptive retryers, and
	// a fixed count keeps the test deterministic. Describe calls are left alone: they run in the batcher under
	// a 30 s bound per call, and a streak of four or five throttles on one DescribeVolumes sleeps past it (the
	// SDK's backoff grows to 20 s per attempt), which fails that one RPC just as upstream's would; a sidecar
	// retries it, but this test calls each RPC once.
	sim.SetFaults(ec2sim.Faults{ThrottleRate: 1, Budget: 3,
		Actions: []string{"CreateVolume", "AttachVolume", "DetachVolume", "DeleteVolume"}})
	vol, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "throttled", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{mountCapability}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	id := vol.GetVolume().GetVolumeId()
	t.Cleanup(func() { _, _ = ctl.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: id}) })
	if _, err := ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: instanceID, VolumeCapability: mountCapability}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if _, err := ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: instanceID}); err != nil {
		t.Fatalf("unpublish: %v", err)
	}
	if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatalf("delete: %v", err)
	}

	resp, err := http.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	throttles := sumMetric(string(body), `aws_ebs_csi_api_request_throttles_total\{operation_name="[A-Za-z]+"\} ([0-9.e+]+)`)
	if throttles != 3 {
		t.Errorf("%v throttles counted, want the 3 the emulator sent; metrics:\n%s", throttles, body)
	}
	for _, op := range []string{"CreateVolume", "AttachVolume", "DetachVolume", "DeleteVolume", "DescribeVolumes"} {
		if sumMetric(string(body), `aws_ebs_csi_api_request_duration_seconds_count\{request="`+op+`"\} ([0-9.e+]+)`) == 0 {
			t.Errorf("no successful %s recorded", op)
		}
	}
	simThrottles := 0.0
	for k, v := range scrapeCodes(t, sim.URL()+"/metrics") {
		if k == "RequestLimitExceeded" {
			simThrottles += v
		}
	}
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

func attachmentState(sim *ec2sim.Server, volumeID string) string {
	for _, a := range sim.State().Attachments {
		if a.VolumeID == volumeID {
			return a.State
		}
	}
	return ""
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// scrapeCodes sums the emulator's ec2sim_requests_total by result code.
func scrapeCodes(t *testing.T, url string) map[string]float64 {
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, m := range regexp.MustCompile(`ec2sim_requests_total\{[^}]*code="([^"]+)"[^}]*\} ([0-9.e+]+)`).FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		out[m[1]] += v
	}
	return out
}
