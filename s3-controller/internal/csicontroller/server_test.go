package csicontroller

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// TestServeOverSocket: the service answers on its unix socket as the csi-provisioner reaches it (identity,
// capabilities, CreateVolume, Unimplemented for the rest) and Start returns cleanly when ctx ends.
func TestServeOverSocket(t *testing.T) {
	_, c, url := newFakeS3(t, "shared")
	sock := filepath.Join(t.TempDir(), "csi", "csi.sock")
	s := New(Options{Endpoint: "unix://" + sock, S3: c, S3Endpoint: url, Version: "v1"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	id := csi.NewIdentityClient(conn)
	// WaitForReady waits for the listener instead of a sleep.
	info, err := id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true))
	if err != nil || info.GetName() != "s3.csi.aws.com" || info.GetVendorVersion() != "v1" {
		t.Fatalf("GetPluginInfo: %v, %v", info, err)
	}
	caps, err := id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil || caps.GetCapabilities()[0].GetService().GetType() != csi.PluginCapability_Service_CONTROLLER_SERVICE {
		t.Fatalf("GetPluginCapabilities: %v, %v", caps, err)
	}
	ctl := csi.NewControllerClient(conn)
	v, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1", Parameters: map[string]string{"bucketName": "shared"},
		VolumeCapabilities: []*csi.VolumeCapability{rwx}})
	if err != nil || v.GetVolume().GetVolumeId() != "dp1:keep:shared:pvc-1/" {
		t.Fatalf("CreateVolume: %v, %v", v, err)
	}
	if _, err := ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "x"}); status.Code(err) != codes.Unimplemented {
		t.Errorf("ControllerExpandVolume: %v, want Unimplemented", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start after cancel: %v", err)
	}
}
