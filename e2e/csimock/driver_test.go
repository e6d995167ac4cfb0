package csimock

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

func startForTest(t *testing.T, opts Options) (*Driver, csi.ControllerClient) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	conn, err := grpc.NewClient(d.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return d, csi.NewControllerClient(conn)
}

var mountCap = []*csi.VolumeCapability{{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}}

func TestCreateIsIdempotentByNameAndDeleteForgets(t *testing.T) {
	d, c := startForTest(t, Options{})
	ctx := context.Background()
	req := &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: mountCap, CapacityRange: &csi.CapacityRange{RequiredBytes: 5 << 30}}
	a, err := c.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if a.Volume.VolumeId != b.Volume.VolumeId || a.Volume.CapacityBytes != 5<<30 {
		t.Fatalf("second create: %v, first %v", b.Volume, a.Volume)
	}
	if got := d.Calls(CreateVolume); got != 2 {
		t.Fatalf("CreateVolume calls = %d, want 2", got)
	}
	if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: a.Volume.VolumeId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: a.Volume.VolumeId}); err != nil {
		t.Fatalf("second delete must succeed: %v", err)
	}
	if vols := d.Volumes(); len(vols) != 0 {
		t.Fatalf("volumes left: %v", vols)
	}
}

func TestPublishShowsInListVolumesWithPaging(t *testing.T) {
	d, c := startForTest(t, Options{})
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c"} {
		d.AddVolume(name, 1<<30)
	}
	vols := d.Volumes()
	if _, err := c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
		VolumeId: vols[1].ID, NodeId: "node-1", VolumeCapability: mountCap[0],
	}); err != nil {
		t.Fatal(err)
	}
	var entries []*csi.ListVolumesResponse_Entry
	token := ""
	pages := 0
	for {
		resp, err := c.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		entries = append(entries, resp.Entries...)
		if token = resp.NextToken; token == "" {
			break
		}
	}
	if pages != 2 || len(entries) != 3 {
		t.Fatalf("pages=%d entries=%d, want 2 and 3", pages, len(entries))
	}
	if got := entries[1].Status.PublishedNodeIds; len(got) != 1 || got[0] != "node-1" {
		t.Fatalf("published nodes of b = %v", got)
	}
	if _, err := c.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: "junk"}); status.Code(err) != codes.Aborted {
		t.Fatalf("bad token: %v, want Aborted", err)
	}
}

func TestBeforeCallInjectsErrorsAndCapsAreEnforced(t *testing.T) {
	d, c := startForTest(t, Options{ControllerCaps: []csi.ControllerServiceCapability_RPC_Type{}})
	ctx := context.Background()
	if _, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: mountCap}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("create without capability: %v, want Unimplemented", err)
	}
	d.SetBeforeCall(func(_ context.Context, method string, _ any) error {
		if method == ControllerPublishVolume {
			return status.Error(codes.DeadlineExceeded, "injected")
		}
		return nil
	})
	_, err := c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "n", VolumeCapability: mountCap[0]})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("publish: %v, want the injected DeadlineExceeded", err)
	}
	caps, err := c.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil || len(caps.Capabilities) != 0 {
		t.Fatalf("capabilities = %v, %v; want none", caps, err)
	}
}

func TestCallsForCountsPerVolume(t *testing.T) {
	d, c := startForTest(t, Options{})
	ctx := context.Background()
	a, b := d.AddVolume("a", 1<<30), d.AddVolume("b", 1<<30)
	for _, id := range []string{a.ID, a.ID, b.ID} {
		if _, err := c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
			VolumeId: id, NodeId: "node-1", VolumeCapability: mountCap[0],
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got := d.CallsFor(ControllerPublishVolume, a.ID); got != 2 {
		t.Errorf("ControllerPublishVolume calls for %s = %d, want 2", a.ID, got)
	}
	if got := d.CallsFor(ControllerPublishVolume, b.ID); got != 1 {
		t.Errorf("ControllerPublishVolume calls for %s = %d, want 1", b.ID, got)
	}
	if got := d.CallsFor(ControllerUnpublishVolume, a.ID); got != 0 {
		t.Errorf("ControllerUnpublishVolume calls for %s = %d, want 0", a.ID, got)
	}
	if got := d.Calls(ControllerPublishVolume); got != 3 {
		t.Errorf("ControllerPublishVolume calls = %d, want 3", got)
	}
}
