package sidecarrig

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/cluster"
	"github.com/stowage-csi/stowage/e2e/cluster/clustertest"
	"github.com/stowage-csi/stowage/e2e/rig"
)

// setUpTimeout bounds what the rig does on a running control plane: apply RBAC, install CRDs, mint tokens.
// It is counted from the control plane's start, which may have waited long for another package's build.
const setUpTimeout = 20 * time.Minute

// Options says what one rig holds.
type Options struct {
	// Sidecars get their RBAC applied and a kubeconfig of their ServiceAccount.
	Sidecars []Sidecar
	// Audit are the resources whose writes the audit log records, as rig.NewAuditLog takes them; none, no
	// audit log.
	Audit []string
	// ControllerManagerArgs are extra kube-controller-manager flags.
	ControllerManagerArgs []string
	// SnapshotCRDs installs the snapshot CRDs; GroupSnapshotCRDs adds the group snapshot CRDs of deploy/crds.
	SnapshotCRDs, GroupSnapshotCRDs bool
}

// Rig is one control plane with an audit log and the sidecars' RBAC applied.
type Rig struct {
	Cluster *cluster.Cluster
	// Client and Snap are admin clientsets at client-go's default limits.
	Client kubernetes.Interface
	Snap   snapclient.Interface
	// Audit is the audit log of Options.Audit; nil without.
	Audit       *rig.AuditLog
	kubeconfigs map[string]string // by ServiceAccount
}

// Start starts a rig for t; the control plane stops when t ends.
func Start(t testing.TB, opts Options) *Rig {
	t.Helper()
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	r := &Rig{kubeconfigs: map[string]string{}}
	clusterOpts := cluster.Options{ControllerManagerArgs: opts.ControllerManagerArgs}
	if len(opts.Audit) > 0 {
		if r.Audit, err = rig.NewAuditLog(t.TempDir(), opts.Audit...); err != nil {
			t.Fatal(err)
		}
		clusterOpts.APIServerArgs = r.Audit.APIServerArgs()
	}
	c := clustertest.StartWith(t, clusterOpts)
	r.Cluster, r.Client = c, c.Client()
	if r.Snap, err = snapclient.NewForConfig(c.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), setUpTimeout)
	defer cancel()
	if opts.SnapshotCRDs || opts.GroupSnapshotCRDs {
		if err := c.InstallSnapshotCRDs(ctx); err != nil {
			t.Fatalf("install snapshot CRDs: %v", err)
		}
	}
	if opts.GroupSnapshotCRDs {
		if err := installGroupCRDs(ctx, c, filepath.Join(root, "deploy", "crds")); err != nil {
			t.Fatalf("install group snapshot CRDs: %v", err)
		}
	}
	for _, s := range opts.Sidecars {
		file := filepath.Join(root, "deploy", "rbac", s.RBAC)
		if err := c.Apply(ctx, file); err != nil {
			t.Fatalf("apply %s: %v", file, err)
		}
		kubeconfig, err := c.ServiceAccountKubeconfig(ctx, Namespace, s.ServiceAccount)
		if err != nil {
			t.Fatal(err)
		}
		r.kubeconfigs[s.ServiceAccount] = kubeconfig
	}
	return r
}

// Writes are the audit log's writes by s, in order.
func (r *Rig) Writes(t testing.TB, s Sidecar) []rig.AuditWrite {
	t.Helper()
	return rig.Filter(r.Audit.MustWrites(t), rig.ByUser(s.User()))
}
