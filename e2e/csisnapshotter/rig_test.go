//go:build e2e

package csisnapshotter

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

const (
	// snapshotterUser is who csi-snapshotter writes as.
	snapshotterUser = "system:serviceaccount:" + sidecarrig.Namespace + ":csi-snapshotter"
	// waitTimeout bounds each wait for csi-snapshotter: it acts in seconds, the margin is for a machine busy
	// with other builds, and for a restarted replica waiting out its killed predecessor's lease.
	waitTimeout = 2 * time.Minute
)

// upstreamArgs are csi-snapshotter's arguments in aws-ebs-csi-driver's manifest, except --csi-address, which
// the rig sets to the mock driver's socket.
var upstreamArgs = []string{
	"--leader-election=true", "--v=2", "--extra-create-metadata", "--kube-api-qps=20", "--kube-api-burst=100",
	"--worker-threads=100", "--retry-interval-max=30m",
}

func TestMain(m *testing.M) { os.Exit(sidecarrig.Main(m, sidecarrig.CSISnapshotter())) }

// rig is the sidecar rig with the snapshot and group snapshot CRDs, csi-snapshotter's RBAC and an audit log of
// content writes.
type rig struct{ *sidecarrig.Rig }

func startRig(t *testing.T) rig {
	t.Helper()
	return rig{sidecarrig.Start(t, sidecarrig.Options{Sidecars: []sidecarrig.Sidecar{sidecarrig.CSISnapshotter()},
		Audit:        []string{"snapshot.storage.k8s.io/volumesnapshotcontents", "groupsnapshot.storage.k8s.io/volumegroupsnapshotcontents"},
		SnapshotCRDs: true, GroupSnapshotCRDs: true})}
}

// startSnapshotter runs Stowage's csi-snapshotter against endpoint as startBinary does.
func (r rig) startSnapshotter(t *testing.T, name, endpoint string, extra ...string) *e2erig.Process {
	t.Helper()
	return r.startBinary(t, "", name, endpoint, extra...)
}

// startBinary runs the csi-snapshotter at path (Stowage's when empty, or upstream's) against endpoint with
// upstream's manifest arguments and then extra, until t ends.
func (r rig) startBinary(t *testing.T, path, name, endpoint string, extra ...string) *e2erig.Process {
	t.Helper()
	return r.Start(t, sidecarrig.CSISnapshotter(), sidecarrig.Run{Name: name, Path: path, Endpoint: endpoint,
		Args: append(append([]string{}, upstreamArgs...), extra...)})
}

// startDriver starts a mock driver named name that takes snapshots (and has no ListSnapshots, so the
// sidecar's start-up capability check is what is tested), stopped when the test ends.
func startDriver(t *testing.T, name string) *csimock.Driver {
	t.Helper()
	return startDriverWith(t, csimock.Options{Name: name})
}

// startDriverWith is startDriver with more options (GroupSnapshots).
func startDriverWith(t *testing.T, opts csimock.Options) *csimock.Driver {
	t.Helper()
	opts.ControllerCaps = []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
	}
	drv, err := csimock.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	return drv
}

// contentWrites returns csi-snapshotter's writes to the content name, as "verb resource name code user".
func (r rig) contentWrites(t *testing.T, name string) []string {
	t.Helper()
	return e2erig.Strings(e2erig.Filter(r.Writes(t, sidecarrig.CSISnapshotter()), func(w e2erig.AuditWrite) bool {
		return w.Name == name
	}))
}
