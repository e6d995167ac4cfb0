package driver

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestRunServesUntilCancelledThenReturns(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "csi", "csi.sock")
	d, _, _ := newTestDriver(t, Options{Endpoint: "unix://" + sock, Version: "v1"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	// WaitForReady lets the call wait for the socket to appear instead of the test guessing when it does.
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true))
	if err != nil || info.GetName() != DriverName {
		t.Fatalf("GetPluginInfo = %v, %v", info, err)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
}

func TestRunFailsOnABadEndpoint(t *testing.T) {
	d, _, _ := newTestDriver(t, Options{Endpoint: "http://localhost:1"})
	if err := d.Run(context.Background()); err == nil {
		t.Fatal("Run with an http:// endpoint succeeded")
	}
}
