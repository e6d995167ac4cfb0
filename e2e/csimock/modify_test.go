package csimock

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestModifyMergesParametersAndRefusesInfeasibleOnes(t *testing.T) {
	d, c := startForTest(t, Options{ControllerCaps: ControllerCapsWithModify()})
	ctx := context.Background()
	vol := d.AddVolume("v", 1<<30)
	if _, err := c.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: vol.ID,
		MutableParameters: map[string]string{"iops": "6000", "csi.storage.k8s.io/pvc/name": "c"}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: vol.ID,
		MutableParameters: map[string]string{"iops": "9000", "tier": InfeasibleValue}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("infeasible modify: %v, want InvalidArgument", err)
	}
	got := d.Volumes()[0].Parameters
	if len(got) != 1 || got["iops"] != "6000" {
		t.Errorf("parameters = %v, want only iops=6000", got)
	}
	if n := d.Calls(ControllerModifyVolume); n != 2 {
		t.Errorf("ControllerModifyVolume calls = %d, want 2", n)
	}
}

func TestModifyNeedsTheCapabilityAndExpandStopsAtCapacity(t *testing.T) {
	d, c := startForTest(t, Options{Capacity: 10 << 30})
	ctx := context.Background()
	vol := d.AddVolume("v", 1<<30)
	if _, err := c.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: vol.ID}); status.Code(err) != codes.Unimplemented {
		t.Errorf("modify without MODIFY_VOLUME: %v, want Unimplemented", err)
	}
	_, err := c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: vol.ID, CapacityRange: &csi.CapacityRange{RequiredBytes: 11 << 30}})
	if status.Code(err) != codes.OutOfRange {
		t.Errorf("expand beyond capacity: %v, want OutOfRange", err)
	}
	rsp, err := c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: vol.ID, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}})
	if err != nil || rsp.CapacityBytes != 2<<30 || !rsp.NodeExpansionRequired {
		t.Errorf("expand to 2Gi: %v, %v; want 2Gi and node expansion", rsp, err)
	}
	block := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}}
	rsp, err = c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: vol.ID, VolumeCapability: block,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 3 << 30}})
	if err != nil || rsp.CapacityBytes != 3<<30 || rsp.NodeExpansionRequired {
		t.Errorf("expand a block volume to 3Gi: %v, %v; want 3Gi without node expansion", rsp, err)
	}
}
