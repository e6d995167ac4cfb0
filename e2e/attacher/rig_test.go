//go:build e2e || bench

package attacher

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
	// attacherNamespace and attacherSA are the ServiceAccount of deploy/rbac/csi-attacher.yaml.
	attacherNamespace = "kube-system"
	attacherSA        = "csi-attacher"
	attacherUser      = "system:serviceaccount:" + attacherNamespace + ":" + attacherSA
	rbacFile          = "../../deploy/rbac/csi-attacher.yaml"
	startTimeout      = 20 * time.Minute
	// waitTimeout bounds each wait for a controller or the attacher: they act in seconds, the margin is for
	// a machine busy with other builds.
	waitTimeout = 2 * time.Minute
)

// rig is one control plane with an audit log, the csi-attacher binary and its RBAC applied.
type rig struct {
	cluster    *cluster.Cluster
	client     kubernetes.Interface
	audit      *e2erig.AuditLog // writes to VolumeAttachments and PersistentVolumes
	binary     string
	kubeconfig string
}

func startRig(t *testing.T) *rig {
	t.Helper()
	dir := t.TempDir()
	audit, err := e2erig.NewAuditLog(dir, "storage.k8s.io/volumeattachments", "/persistentvolumes")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{audit: audit, binary: buildAttacher(t, dir)}
	c := clustertest.StartWith(t, cluster.Options{APIServerArgs: audit.APIServerArgs()})
	r.cluster, r.client = c, c.Client()
	// Counted from here: the control plane may have waited long for another package's build of its binaries.
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.Apply(ctx, rbacFile); err != nil {
		t.Fatalf("apply %s: %v", rbacFile, err)
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, attacherNamespace, attacherSA)
	if err != nil {
		t.Fatal(err)
	}
	r.kubeconfig = kubeconfig
	return r
}

// buildAttacher builds the attacher module's csi-attacher into dir with a version stamp.
func buildAttacher(t *testing.T, dir string) string {
	t.Helper()
	root, err := e2erig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := e2erig.BuildCommand(context.Background(), root, "attacher", "csi-attacher", dir)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startAttacher runs csi-attacher against endpoint as the attacher's ServiceAccount. It is killed when
// the test ends, if it is still running, and its log is printed if the test failed.
func (r *rig) startAttacher(t *testing.T, name, endpoint string, args ...string) *e2erig.Process {
	t.Helper()
	return r.startBinary(t, r.binary, name, endpoint, args...)
}

// startBinary runs the csi-attacher at path (Stowage's or upstream's) as startAttacher does.
func (r *rig) startBinary(t *testing.T, path, name, endpoint string, args ...string) *e2erig.Process {
	t.Helper()
	args = append([]string{
		"--kubeconfig=" + r.kubeconfig,
		"--csi-address=" + endpoint,
		"--leader-election",
		"--leader-election-namespace=" + attacherNamespace,
		"-v=2",
	}, args...)
	p, err := e2erig.Start(e2erig.Spec{Name: name, Path: path, Args: args, LogDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start csi-attacher: %v", err)
	}
	t.Cleanup(func() {
		p.Signal(syscall.SIGKILL)
		<-p.Done()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.Tail(40))
		}
	})
	return p
}

// auditWrites returns the audit log's writes by user (every user when empty), in order, as
// "verb resource[/subresource] name code user".
func (r *rig) auditWrites(t *testing.T, user string) []string {
	t.Helper()
	writes := r.audit.MustWrites(t)
	if user != "" {
		writes = e2erig.Filter(writes, e2erig.ByUser(user))
	}
	return e2erig.Strings(writes)
}

// since returns the entries of now that were not in before (the log only grows).
func since(before, now []string) []string { return now[len(before):] }
