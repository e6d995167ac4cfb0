//go:build e2e || bench

package snapshotcontroller

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
	// controllerUser and snapshotterUser are who the two binaries write as.
	controllerUser   = "system:serviceaccount:" + sidecarrig.Namespace + ":snapshot-controller"
	snapshotterUser  = "system:serviceaccount:" + sidecarrig.Namespace + ":csi-snapshotter"
	waitTimeout      = 2 * time.Minute
	snapshotDriverNm = "snap.csi.example.com"
	// testNamespace holds the claims and VolumeSnapshots of the tests.
	testNamespace = "default"
)

// controllerArgs are the args of upstream's own snapshot-controller Deployment
// (deploy/kubernetes/snapshot-controller/setup-snapshot-controller.yaml); snapshotterArgs are csi-snapshotter's
// in aws-ebs-csi-driver's manifest. Both binaries, Stowage's or upstream's, get exactly these plus what a process
// outside a Pod needs (kubeconfig, Lease namespace, socket).
var (
	controllerArgs  = []string{"--v=5", "--leader-election=true"}
	snapshotterArgs = []string{"--leader-election=true", "--v=2", "--extra-create-metadata", "--kube-api-qps=20",
		"--kube-api-burst=100", "--worker-threads=100", "--retry-interval-max=30m"}
)

func TestMain(m *testing.M) {
	os.Exit(sidecarrig.Main(m, sidecarrig.SnapshotController(), sidecarrig.CSISnapshotter()))
}

// rig is the sidecar rig with the snapshot CRDs (and the group snapshot CRDs when asked), both binaries' RBAC
// and an audit log of the writes to snapshots, contents and claims.
type rig struct{ *sidecarrig.Rig }

func startRig(t testing.TB, groups bool) rig {
	t.Helper()
	return rig{sidecarrig.Start(t, sidecarrig.Options{
		Sidecars: []sidecarrig.Sidecar{sidecarrig.SnapshotController(), sidecarrig.CSISnapshotter()},
		Audit: []string{"snapshot.storage.k8s.io/volumesnapshots", "snapshot.storage.k8s.io/volumesnapshotcontents",
			"/persistentvolumeclaims"},
		SnapshotCRDs: true, GroupSnapshotCRDs: groups,
	})}
}

// binaries are the two programs of one run, Stowage's or upstream's.
type binaries struct {
	controller, snapshotter string
}

// stowageBinaries are Stowage's snapshot-controller and csi-snapshotter.
func stowageBinaries(t testing.TB) binaries {
	t.Helper()
	return binaries{sidecarrig.Binary(t, sidecarrig.SnapshotController()), sidecarrig.Binary(t, sidecarrig.CSISnapshotter())}
}

// upstreamBinaries are external-snapshotter's, built from e2e/tools/external-snapshotter (cached).
func upstreamBinaries(t testing.TB) binaries {
	t.Helper()
	return binaries{sidecarrig.Upstream(t, sidecarrig.SnapshotController()), sidecarrig.Upstream(t, sidecarrig.CSISnapshotter())}
}

// startController runs a snapshot-controller as its ServiceAccount with upstream's Deployment args and extra.
func (r rig) startController(t testing.TB, name, bin string, extra ...string) *e2erig.Process {
	t.Helper()
	return r.Start(t, sidecarrig.SnapshotController(), sidecarrig.Run{Name: name, Path: bin,
		Args: append(append([]string{}, controllerArgs...), extra...)})
}

// startSnapshotter runs a csi-snapshotter for the driver at endpoint as its ServiceAccount, with the EBS
// manifest's args and extra.
func (r rig) startSnapshotter(t testing.TB, name, bin, endpoint string, extra ...string) *e2erig.Process {
	t.Helper()
	return r.Start(t, sidecarrig.CSISnapshotter(), sidecarrig.Run{Name: name, Path: bin, Endpoint: endpoint,
		Args: append(append([]string{}, snapshotterArgs...), extra...)})
}

// startDriver starts a mock driver that takes snapshots, stopped when the test ends.
func startDriver(t testing.TB) *csimock.Driver {
	t.Helper()
	drv, err := csimock.Start(context.Background(), csimock.Options{Name: snapshotDriverNm, ControllerCaps: []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	return drv
}
