package csimock

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func withSnapshots() Options {
	return Options{ControllerCaps: append([]csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT}, defaultControllerCaps...)}
}

func TestSnapshotsAreIdempotentAndRestoresNeedAKnownSnapshot(t *testing.T) {
	d, c := startForTest(t, withSnapshots())
	ctx := context.Background()
	vol := d.AddVolume("pv-src", 2<<30)
	req := &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: vol.ID}
	a, err := c.CreateSnapshot(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateSnapshot(ctx, req)
	if err != nil || b.Snapshot.SnapshotId != a.Snapshot.SnapshotId || !a.Snapshot.ReadyToUse || a.Snapshot.SizeBytes != 2<<30 {
		t.Fatalf("second CreateSnapshot = %v, %v; first %v", b, err, a)
	}
	other := d.AddVolume("pv-other", 1<<30)
	for _, tc := range []struct {
		name string
		err  error
		want codes.Code
	}{
		{"same name, other source", call(c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: other.ID})), codes.AlreadyExists},
		{"unknown source", call(c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snapshot-2", SourceVolumeId: "vol-none"})), codes.NotFound},
		{"no name", call(c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{SourceVolumeId: vol.ID})), codes.InvalidArgument},
		{"restore from an unknown snapshot", call(c.CreateVolume(ctx, restoreReq("pvc-x", "snap-none", 2<<30))), codes.NotFound},
		{"restore smaller than the snapshot", call(c.CreateVolume(ctx, restoreReq("pvc-y", a.Snapshot.SnapshotId, 1<<30))), codes.OutOfRange},
	} {
		if got := status.Code(tc.err); got != tc.want {
			t.Errorf("%s: code %v (%v), want %v", tc.name, got, tc.err, tc.want)
		}
	}
	restored, err := c.CreateVolume(ctx, restoreReq("pvc-z", a.Snapshot.SnapshotId, 2<<30))
	if err != nil || restored.Volume.ContentSource.GetSnapshot().GetSnapshotId() != a.Snapshot.SnapshotId {
		t.Fatalf("restore = %v, %v", restored, err)
	}
	for i := 0; i < 2; i++ {
		if _, err := c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: a.Snapshot.SnapshotId}); err != nil {
			t.Fatalf("DeleteSnapshot #%d: %v", i+1, err)
		}
	}
	if snaps := d.Snapshots(); len(snaps) != 0 {
		t.Fatalf("snapshots left: %v", snaps)
	}
	pre := d.AddSnapshot("pre-provisioned", 1<<30)
	if _, err := c.CreateVolume(ctx, restoreReq("pvc-pre", pre.ID, 1<<30)); err != nil {
		t.Fatalf("restore from an added snapshot: %v", err)
	}
}

func TestSnapshotsNeedTheCapability(t *testing.T) {
	d, c := startForTest(t, Options{})
	vol := d.AddVolume("pv-src", 1<<30)
	_, err := c.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: vol.ID})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("CreateSnapshot without CREATE_DELETE_SNAPSHOT = %v, want Unimplemented", err)
	}
}

func call[T any](_ T, err error) error { return err }

func restoreReq(name, snapshot string, size int64) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: mountCap, CapacityRange: &csi.CapacityRange{RequiredBytes: size},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snapshot}}}}
}
