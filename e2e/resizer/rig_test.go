//go:build e2e || bench

package resizer

import (
	"context"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/cluster"
	"github.com/stowage-csi/stowage/e2e/cluster/clustertest"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

const (
	// resizerNamespace and resizerSA are the ServiceAccount of deploy/rbac/csi-resizer.yaml.
	resizerNamespace = "kube-system"
	resizerSA        = "csi-resizer"
	resizerUser      = "system:serviceaccount:" + resizerNamespace + ":" + resizerSA
	rbacFile         = "../../deploy/rbac/csi-resizer.yaml"
	startTimeout     = 20 * time.Minute
	// waitTimeout bounds each wait for a controller or the resizer: they act in seconds, the margin is for a
	// machine busy with other builds.
	waitTimeout = 2 * time.Minute
)

// upstreamArgs are exactly the csi-resizer args of aws-ebs-csi-driver's manifest, without --csi-address
// (the socket differs here; startResizer adds it).
var upstreamArgs = []string{"--timeout=60s", "--extra-modify-metadata", "--v=2", "--handle-volume-inuse-error=false",
	"--leader-election=true", "--kube-api-qps=20", "--kube-api-burst=100", "--workers=100", "--retry-interval-max=30m"}

// rig is one control plane with an audit log, the csi-resizer binary and its RBAC applied.
type rig struct {
	cluster    *cluster.Cluster
	client     kubernetes.Interface
	audit      *e2erig.AuditLog // writes to claims and volumes
	binary     string
	kubeconfig string
}

func startRig(t *testing.T) *rig {
	t.Helper()
	dir := t.TempDir()
	audit, err := e2erig.NewAuditLog(dir, "/persistentvolumeclaims", "/persistentvolumes")
	if err != nil {
		t.Fatal(err)
	}
	root, err := e2erig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := e2erig.BuildCommand(context.Background(), root, "resizer", "csi-resizer", dir)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{audit: audit, binary: bin}
	c := clustertest.StartWith(t, cluster.Options{APIServerArgs: audit.APIServerArgs()})
	r.cluster, r.client = c, c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.Apply(ctx, rbacFile); err != nil {
		t.Fatalf("apply %s: %v", rbacFile, err)
	}
	if r.kubeconfig, err = c.ServiceAccountKubeconfig(ctx, resizerNamespace, resizerSA); err != nil {
		t.Fatal(err)
	}
	return r
}

// startResizer runs csi-resizer against endpoint as the resizer's ServiceAccount, with ENABLE_VAC_FALLBACK=true
// as the manifest sets it. It is killed when the test ends, if it still runs, and its log is printed if the test
// failed.
func (r *rig) startResizer(t *testing.T, name, endpoint string, args ...string) *e2erig.Process {
	t.Helper()
	args = append([]string{
		"--kubeconfig=" + r.kubeconfig,
		"--csi-address=" + endpoint,
		"--leader-election-namespace=" + resizerNamespace,
	}, args...)
	p, err := e2erig.Start(e2erig.Spec{Name: name, Path: r.binary, Args: args, LogDir: t.TempDir(),
		Env: []string{"ENABLE_VAC_FALLBACK=true"}})
	if err != nil {
		t.Fatalf("start csi-resizer: %v", err)
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

// resizerWrites returns the audit log's writes by the resizer, in order.
func (r *rig) resizerWrites(t *testing.T) []e2erig.AuditWrite {
	t.Helper()
	return e2erig.Filter(r.audit.MustWrites(t), e2erig.ByUser(resizerUser))
}
