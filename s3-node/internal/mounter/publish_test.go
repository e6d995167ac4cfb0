package mounter

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stowage-csi/stowage/s3-node/internal/testutil"
	"github.com/stowage-csi/stowage/shared/mountproto"
)

// A publish through a Mountpoint Pod whose teardown has begun (mount.exit written) fails at once, before any
// credential, FUSE mount, send or bind: that Pod's mounter would take the mount and exit 0 on mount.exit
// without serving it or writing mount.err, and the publish would wait out its whole deadline, holding up
// the deletion of the workload that asked for it.
func TestPublishRefusesAnEndingMountpointPod(t *testing.T) {
	sys := testutil.NewFakeSys()
	paths := Paths{Kubelet: t.TempDir()}
	sent := 0
	m := New(Config{Sys: sys, Paths: paths, Send: func(context.Context, string, mountproto.Options) error {
		sent++
		return nil
	}})
	comm := paths.CommDir("mp-uid")
	if err := os.MkdirAll(comm, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(comm, mountproto.ExitName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	credentials := 0
	err := m.Publish(context.Background(), Request{Target: filepath.Join(t.TempDir(), "target"), MPPodName: "mp-1", MPPodUID: "mp-uid",
		Credentials: func(context.Context) ([]string, error) { credentials++; return nil, nil }})
	if !errors.Is(err, ErrPodEnding) {
		t.Fatalf("Publish = %v, want ErrPodEnding", err)
	}
	if calls := sys.Calls(); len(calls) != 0 || sent != 0 || credentials != 0 {
		t.Fatalf("a publish through an ending Pod did %v, sent %d mounts and wrote credentials %d times; want nothing", calls, sent, credentials)
	}
}
