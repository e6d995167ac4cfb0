package rig

import (
	"context"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/e2e/csimock"
)

// A held call fails as a crash fails it, and the restarted driver answers on the same endpoint, with the
// volumes kept under their IDs.
func TestKillDuringFailsTheHeldCallAndServesAgainOnTheSameSocket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := StartRestartingDriver(t, ctx, csimock.Options{Name: "restart.csi.stowage.io"})
	endpoint := d.Endpoint()
	vol := d.Driver.AddVolume("pv-1", 1<<30)
	d.Hold(csimock.ControllerExpandVolume)
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := csi.NewControllerClient(conn)
	expand := func() error {
		_, err := client.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: vol.ID,
			CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}})
		return err
	}
	held := make(chan error, 1)
	go func() { held <- expand() }()

	second, _ := d.KillDuring(t, csimock.ControllerExpandVolume, vol)
	if err := <-held; status.Code(err) != codes.Unavailable {
		t.Errorf("the held call ended with %v, want Unavailable", err)
	}
	if d.Endpoint() != endpoint || d.Driver != second {
		t.Errorf("after the restart: endpoint %s, want %s; Driver is not the restarted one", d.Endpoint(), endpoint)
	}
	Eventually(t, ctx, 30*time.Second, "ControllerExpandVolume on the restarted driver", func(context.Context) (bool, error) {
		return expand() == nil, nil
	})
	if n := second.CallsFor(csimock.ControllerExpandVolume, vol.ID); n < 1 {
		t.Errorf("ControllerExpandVolume calls on the restarted driver = %d, want the test's", n)
	}
}

func TestCheckFollowedPassesARunningSidecarThatLoggedTheDriverBack(t *testing.T) {
	p, err := Start(Spec{Name: "sidecar", Path: "/bin/sh", Args: []string{"-c", `echo "I1126 18:00:00.000000 1 restart.go:203] \"` + driverBackLine + `\""; exec sleep 300`}, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(time.Second) })
	Eventually(t, context.Background(), 10*time.Second, "the line in the log", func(context.Context) (bool, error) {
		return p.Tail(1) != "", nil
	})
	CheckFollowed(t, p)
}
