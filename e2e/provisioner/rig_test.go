//go:build e2e || bench

package provisioner

import (
	"context"
	"os"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/csimock"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

const (
	driverName = "mock.csi.stowage.io"
	// provisionerUser is who csi-provisioner writes as.
	provisionerUser = "system:serviceaccount:" + sidecarrig.Namespace + ":csi-provisioner"
	intentKey       = "provisioner.stowage-csi.io/volume-being-created"
	pvFinalizer     = "external-provisioner.volume.kubernetes.io/finalizer"
	zoneKey         = "topology.mock.csi.stowage.io/zone"
)

func TestMain(m *testing.M) { os.Exit(sidecarrig.Main(m, sidecarrig.Provisioner())) }

// startRig starts the sidecar rig with csi-provisioner's RBAC and opts' audit log, CRDs and flags.
func startRig(t testing.TB, opts sidecarrig.Options) *sidecarrig.Rig {
	t.Helper()
	opts.Sidecars = []sidecarrig.Sidecar{sidecarrig.Provisioner()}
	return sidecarrig.Start(t, opts)
}

// adminClient is an admin clientset of r's cluster with limits high enough that the test itself never
// throttles.
func adminClient(t testing.TB, r *sidecarrig.Rig) kubernetes.Interface {
	t.Helper()
	cfg := r.Cluster.RESTConfig()
	cfg.QPS, cfg.Burst = 1000, 2000
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

// setting is what the subtests of one test share: the rig, its admin client, the mock driver and the
// namespace of the claims.
type setting struct {
	r    *sidecarrig.Rig
	kube kubernetes.Interface
	drv  *csimock.Driver
	ns   string
}

// grantCapacity adds what --enable-capacity needs beyond deploy/rbac/csi-provisioner.yaml, which has exactly
// upstream's default RBAC: a user enabling capacity adds the same (with --capacity-ownerref-level=-1 no owner
// lookups, so no pods or apps rules).
func grantCapacity(t testing.TB, ctx context.Context, kube kubernetes.Interface) {
	t.Helper()
	ns := sidecarrig.Namespace
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "stowage-csi-provisioner-capacity", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"storage.k8s.io"}, Resources: []string{"csistoragecapacities"},
			Verbs: []string{"list", "create", "update", "delete"},
		}},
	}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: ns},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sidecarrig.Provisioner().ServiceAccount, Namespace: ns}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// process is one running csi-provisioner.
type process struct {
	*rig.Process
	httpURL string
}

// startProvisioner runs Stowage's csi-provisioner as startProvisionerAt does.
func startProvisioner(t testing.TB, r *sidecarrig.Rig, endpoint string, extra ...string) *process {
	t.Helper()
	return startProvisionerAt(t, r, "", endpoint, extra...)
}

// startProvisionerAt runs the csi-provisioner at path (Stowage's when empty, or upstream's) against endpoint
// plus extra flags, with leader election on (short lease, so a replacement for a killed process takes over
// quickly) and an HTTP endpoint, until t ends.
func startProvisionerAt(t testing.TB, r *sidecarrig.Rig, path, endpoint string, extra ...string) *process {
	t.Helper()
	run, addr := provisionerRun(t, path, endpoint, extra)
	return &process{Process: r.Start(t, sidecarrig.Provisioner(), run), httpURL: "http://" + addr}
}

// provisionerRun is the start of a csi-provisioner with the tests' common flags, and its HTTP address.
func provisionerRun(t testing.TB, path, endpoint string, extra []string) (sidecarrig.Run, string) {
	addr := rig.FreeAddr(t)
	return sidecarrig.Run{Name: "csi-provisioner", Path: path, Endpoint: endpoint, Args: append([]string{
		"--leader-election",
		"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=1s",
		"--http-endpoint=" + addr,
		"--retry-interval-start=200ms", "--retry-interval-max=10s",
		"-v=2",
	}, extra...)}, addr
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *process) kill() { sidecarrig.Kill(p.Process) }

// logContains reports whether the process logged s so far.
func (p *process) logContains(s string) bool {
	data, err := os.ReadFile(p.LogPath)
	return err == nil && strings.Contains(string(data), s)
}

func storageClass(name string, mode storagev1.VolumeBindingMode, params map[string]string) *storagev1.StorageClass {
	del := v1.PersistentVolumeReclaimDelete
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       driverName,
		Parameters:        params,
		ReclaimPolicy:     &del,
		VolumeBindingMode: &mode,
	}
}

// createClass creates the StorageClass sc.
func createClass(t testing.TB, ctx context.Context, kube kubernetes.Interface, sc *storagev1.StorageClass) {
	t.Helper()
	if _, err := kube.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createNamespace creates the namespace name.
func createNamespace(t testing.TB, ctx context.Context, kube kubernetes.Interface, name string) {
	t.Helper()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func claim(ns, name, class, size string) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceStorage: resource.MustParse(size),
			}},
		},
	}
}
