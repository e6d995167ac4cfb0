//go:build e2e || bench

package snapshotter

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/cluster"
	"github.com/stowage-csi/stowage/e2e/cluster/clustertest"
	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/tools"
)

const (
	// The ServiceAccounts of deploy/rbac/snapshot-controller.yaml and deploy/rbac/csi-snapshotter.yaml.
	namespace        = "kube-system"
	controllerSA     = "snapshot-controller"
	snapshotterSA    = "csi-snapshotter"
	controllerUser   = "system:serviceaccount:" + namespace + ":" + controllerSA
	controllerRBAC   = "../../deploy/rbac/snapshot-controller.yaml"
	snapshotterRBAC  = "../../deploy/rbac/csi-snapshotter.yaml"
	startTimeout     = 20 * time.Minute
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

// rig is one control plane with the snapshot CRDs, both binaries' RBAC and an audit log of the writes to
// snapshots, contents and claims.
type rig struct {
	cluster               *cluster.Cluster
	kube                  kubernetes.Interface
	snap                  snapclient.Interface
	audit                 *e2erig.AuditLog
	controllerKubeconfig  string
	snapshotterKubeconfig string
}

func startRig(t testing.TB) *rig {
	t.Helper()
	audit, err := e2erig.NewAuditLog(t.TempDir(), "snapshot.storage.k8s.io/volumesnapshots",
		"snapshot.storage.k8s.io/volumesnapshotcontents", "/persistentvolumeclaims")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{audit: audit}
	c := clustertest.StartWith(t, cluster.Options{APIServerArgs: audit.APIServerArgs()})
	r.cluster, r.kube = c, c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.InstallSnapshotCRDs(ctx); err != nil {
		t.Fatalf("install snapshot CRDs: %v", err)
	}
	for _, f := range []string{controllerRBAC, snapshotterRBAC} {
		if err := c.Apply(ctx, f); err != nil {
			t.Fatalf("apply %s: %v", f, err)
		}
	}
	if r.snap, err = snapclient.NewForConfig(c.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	if r.controllerKubeconfig, err = c.ServiceAccountKubeconfig(ctx, namespace, controllerSA); err != nil {
		t.Fatal(err)
	}
	if r.snapshotterKubeconfig, err = c.ServiceAccountKubeconfig(ctx, namespace, snapshotterSA); err != nil {
		t.Fatal(err)
	}
	return r
}

// binaries are the two programs of one run, Stowage's or upstream's.
type binaries struct {
	controller, snapshotter string
}

// stowageBinaries builds Stowage's snapshot-controller and csi-snapshotter with a version stamp.
func stowageBinaries(t testing.TB) binaries {
	t.Helper()
	root, err := e2erig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var b binaries
	if b.controller, err = e2erig.BuildCommand(context.Background(), root, "snapshotter", "snapshot-controller", dir); err != nil {
		t.Fatal(err)
	}
	if b.snapshotter, err = e2erig.BuildCommand(context.Background(), root, "snapshotter", "csi-snapshotter", dir); err != nil {
		t.Fatal(err)
	}
	return b
}

// upstreamBinaries are external-snapshotter's, built from e2e/tools/external-snapshotter (cached).
func upstreamBinaries(t testing.TB) binaries {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	var b binaries
	var err error
	if b.controller, err = tools.Binary(ctx, tools.ExternalSnapshotter(), "snapshot-controller"); err != nil {
		t.Fatal(err)
	}
	if b.snapshotter, err = tools.Binary(ctx, tools.ExternalSnapshotter(), "csi-snapshotter"); err != nil {
		t.Fatal(err)
	}
	return b
}

// startController runs a snapshot-controller as its ServiceAccount with upstream's Deployment args and extra.
func (r *rig) startController(t testing.TB, name, bin string, extra ...string) *e2erig.Process {
	t.Helper()
	args := append([]string{"--kubeconfig=" + r.controllerKubeconfig, "--leader-election-namespace=" + namespace}, controllerArgs...)
	return r.start(t, name, bin, append(args, extra...))
}

// startSnapshotter runs a csi-snapshotter for the driver at endpoint as its ServiceAccount, with the EBS
// manifest's args and extra.
func (r *rig) startSnapshotter(t testing.TB, name, bin, endpoint string, extra ...string) *e2erig.Process {
	t.Helper()
	args := append([]string{"--kubeconfig=" + r.snapshotterKubeconfig, "--csi-address=" + endpoint,
		"--leader-election-namespace=" + namespace}, snapshotterArgs...)
	return r.start(t, name, bin, append(args, extra...))
}

// start runs bin; it is killed when the test ends, and its log is printed if the test failed.
func (r *rig) start(t testing.TB, name, bin string, args []string) *e2erig.Process {
	t.Helper()
	p, err := e2erig.Start(e2erig.Spec{Name: name, Path: bin, Args: args, LogDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		p.Signal(syscall.SIGKILL)
		<-p.Done()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.Tail(80))
		}
	})
	return p
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
