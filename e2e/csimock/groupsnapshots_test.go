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

func TestGroupSnapshots(t *testing.T) {
	ctx := context.Background()
	d, err := Start(ctx, Options{GroupSnapshots: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	conn, err := grpc.NewClient(d.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	caps, err := csi.NewIdentityClient(conn).GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	advertised := false
	for _, c := range caps.GetCapabilities() {
		advertised = advertised || c.GetService().GetType() == csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE
	}
	if !advertised {
		t.Errorf("plugin capabilities %v lack GROUP_CONTROLLER_SERVICE", caps.GetCapabilities())
	}

	a, b := d.AddVolume("a", 1<<30), d.AddVolume("b", 2<<30)
	gc := csi.NewGroupControllerClient(conn)
	req := &csi.CreateVolumeGroupSnapshotRequest{Name: "g1", SourceVolumeIds: []string{a.ID, b.ID}}
	first, err := gc.CreateVolumeGroupSnapshot(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := gc.CreateVolumeGroupSnapshot(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	g := first.GetGroupSnapshot()
	if g.GetGroupSnapshotId() != again.GetGroupSnapshot().GetGroupSnapshotId() || len(g.GetSnapshots()) != 2 || len(d.Snapshots()) != 2 {
		t.Fatalf("create twice = %v and %v, snapshots %v; want one group of two members", g, again.GetGroupSnapshot(), d.Snapshots())
	}
	for i, s := range g.GetSnapshots() {
		if s.GetSourceVolumeId() != req.SourceVolumeIds[i] || s.GetGroupSnapshotId() != g.GetGroupSnapshotId() {
			t.Errorf("member %d = %v, want a snapshot of %s in the group", i, s, req.SourceVolumeIds[i])
		}
	}
	if _, err := gc.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "g1", SourceVolumeIds: []string{a.ID}}); status.Code(err) != codes.AlreadyExists {
		t.Errorf("same name, other volumes: err = %v, want AlreadyExists", err)
	}
	ids := []string{g.GetSnapshots()[1].GetSnapshotId(), g.GetSnapshots()[0].GetSnapshotId()}
	if _, err := gc.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: g.GetGroupSnapshotId(), SnapshotIds: ids[:1]}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("delete with a partial member list: err = %v, want InvalidArgument", err)
	}
	if _, err := gc.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: g.GetGroupSnapshotId(), SnapshotIds: ids}); err != nil {
		t.Fatal(err)
	}
	if len(d.GroupSnapshots()) != 0 || len(d.Snapshots()) != 0 {
		t.Errorf("after delete: groups %v, snapshots %v; want none", d.GroupSnapshots(), d.Snapshots())
	}
	if _, err := gc.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: g.GetGroupSnapshotId()}); status.Code(err) != codes.NotFound {
		t.Errorf("get after delete: err = %v, want NotFound", err)
	}
}
