//go:build e2e

package csisnapshotter

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
)

const (
	// snapshotterNamespace and snapshotterSA are the ServiceAccount of deploy/rbac/csi-snapshotter.yaml.
	snapshotterNamespace = "kube-system"
	snapshotterSA        = "csi-snapshotter"
	snapshotterUser      = "system:serviceaccount:" + snapshotterNamespace + ":" + snapshotterSA
	rbacFile             = "../../deploy/rbac/csi-snapshotter.yaml"
	startTimeout         = 20 * time.Minute
	// waitTimeout bounds each wait for csi-snapshotter: it acts in seconds, the margin is for a machine busy
	// with other builds, and for a restarted replica waiting out its killed predecessor's lease.
	waitTimeout = 2 * time.Minute
)

// upstreamArgs are csi-snapshotter's arguments in aws-ebs-csi-driver's manifest (shared/reference/
// upstream-manifests.md), except --csi-address, which the rig sets to the mock driver's socket.
var upstreamArgs = []string{
	"--leader-election=true", "--v=2", "--extra-create-metadata", "--kube-api-qps=20", "--kube-api-burst=100",
	"--worker-threads=100", "--retry-interval-max=30m",
}

// rig is one control plane with the snapshot CRDs and an audit log of content writes, the csi-snapshotter
// binary and its RBAC applied.
type rig struct {
	cluster    *cluster.Cluster
	kube       kubernetes.Interface
	snap       snapclient.Interface
	audit      *e2erig.AuditLog
	binary     string
	kubeconfig string
}

func startRig(t *testing.T) *rig {
	t.Helper()
	dir := t.TempDir()
	audit, err := e2erig.NewAuditLog(dir, "snapshot.storage.k8s.io/volumesnapshotcontents", "groupsnapshot.storage.k8s.io/volumegroupsnapshotcontents")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{audit: audit, binary: buildSnapshotter(t, dir)}
	c := clustertest.StartWith(t, cluster.Options{APIServerArgs: audit.APIServerArgs()})
	r.cluster, r.kube = c, c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.InstallSnapshotCRDs(ctx); err != nil {
		t.Fatalf("install snapshot CRDs: %v", err)
	}
	if err := installGroupCRDs(ctx, c); err != nil {
		t.Fatalf("install group snapshot CRDs: %v", err)
	}
	if err := c.Apply(ctx, rbacFile); err != nil {
		t.Fatalf("apply %s: %v", rbacFile, err)
	}
	if r.snap, err = snapclient.NewForConfig(c.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	if r.kubeconfig, err = c.ServiceAccountKubeconfig(ctx, snapshotterNamespace, snapshotterSA); err != nil {
		t.Fatal(err)
	}
	return r
}

// buildSnapshotter builds the snapshotter module's csi-snapshotter into dir with a version stamp.
func buildSnapshotter(t *testing.T, dir string) string {
	t.Helper()
	root, err := e2erig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := e2erig.BuildCommand(context.Background(), root, "snapshotter", "csi-snapshotter", dir)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startSnapshotter runs csi-snapshotter against endpoint as its ServiceAccount, with upstream's manifest
// arguments and then extra. In a pod, the Lease's namespace comes from the pod's; here it is given. The
// process is killed when the test ends, if it still runs, and its log is printed if the test failed.
func (r *rig) startSnapshotter(t *testing.T, name, endpoint string, extra ...string) *e2erig.Process {
	t.Helper()
	return r.startBinary(t, r.binary, name, endpoint, extra...)
}

// startBinary runs the csi-snapshotter at path (Stowage's or upstream's) as startSnapshotter does.
func (r *rig) startBinary(t *testing.T, path, name, endpoint string, extra ...string) *e2erig.Process {
	t.Helper()
	args := append([]string{"--kubeconfig=" + r.kubeconfig, "--csi-address=" + endpoint,
		"--leader-election-namespace=" + snapshotterNamespace}, upstreamArgs...)
	args = append(args, extra...)
	p, err := e2erig.Start(e2erig.Spec{Name: name, Path: path, Args: args, LogDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start csi-snapshotter: %v", err)
	}
	t.Cleanup(func() {
		p.Signal(syscall.SIGKILL)
		<-p.Done()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.Tail(60))
		}
	})
	return p
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
func (r *rig) contentWrites(t *testing.T, name string) []string {
	t.Helper()
	return e2erig.Strings(e2erig.Filter(r.audit.MustWrites(t), func(w e2erig.AuditWrite) bool {
		return w.User == snapshotterUser && w.Name == name
	}))
}
