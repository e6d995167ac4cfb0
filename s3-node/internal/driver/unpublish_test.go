package driver

import (
	"context"
	"os"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestUnpublish(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for _, uid := range []string{"w1", "w2"} {
		if _, err := r.d.NodePublishVolume(ctx, r.publishReq(uid)); err != nil {
			t.Fatal(err)
		}
	}
	unpub := func(uid string) error {
		_, err := r.d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: r.target(uid)})
		return err
	}
	if err := unpub("w1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.target("w1")); !os.IsNotExist(err) {
		t.Errorf("target left: %v", err)
	}
	// The source and the other workload's bind stay.
	if got := r.sys.MountPoints(); len(got) != 2 || got[0] != r.source() || got[1] != r.target("w2") {
		t.Fatalf("mounts after unpublish %v", got)
	}
	// Again, and for a target that never existed: success.
	if err := unpub("w1"); err != nil {
		t.Fatal(err)
	}
	if err := unpub("never"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("no target: %v", err)
	}
}

func TestIdentityAndNodeInfo(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	info, _ := r.d.GetPluginInfo(ctx, nil)
	probe, _ := r.d.Probe(ctx, nil)
	caps, _ := r.d.NodeGetCapabilities(ctx, nil)
	ni, _ := r.d.NodeGetInfo(ctx, nil)
	if info.Name != "s3.csi.aws.com" || !probe.Ready.Value || len(caps.Capabilities) != 1 ||
		caps.Capabilities[0].GetRpc().GetType() != csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP || ni.NodeId != "node-1" {
		t.Fatalf("info %v probe %v caps %v nodeInfo %v", info, probe, caps, ni)
	}
	if _, err := r.d.NodeStageVolume(ctx, nil); status.Code(err) != codes.Unimplemented {
		t.Fatalf("NodeStageVolume: %v", err)
	}
}
