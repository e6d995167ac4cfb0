//go:build e2e || bench

package provisioner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/cluster"
	"github.com/stowage-csi/stowage/e2e/rig"
)

const (
	driverName  = "mock.csi.stowage.io"
	namespace   = "kube-system" // where deploy/rbac/csi-provisioner.yaml puts the ServiceAccount and Lease
	saName      = "csi-provisioner"
	intentKey   = "provisioner.stowage-csi.io/volume-being-created"
	pvFinalizer = "external-provisioner.volume.kubernetes.io/finalizer"
	zoneKey     = "topology.mock.csi.stowage.io/zone"
)

// repoRoot is the folder holding go.work.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// TestMain removes the built binary after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// provisionerBinary builds csi-provisioner once per test binary.
func provisionerBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "csi-provisioner-bin")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		binPath, buildErr = rig.BuildCommand(context.Background(), repoRoot(t), "provisioner", "csi-provisioner", dir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// serviceAccountKubeconfig applies the provisioner's RBAC and returns a kubeconfig for its ServiceAccount.
func serviceAccountKubeconfig(t testing.TB, c *cluster.Cluster) string {
	t.Helper()
	ctx := context.Background()
	if err := c.Apply(ctx, filepath.Join(repoRoot(t), "deploy", "rbac", "csi-provisioner.yaml")); err != nil {
		t.Fatal(err)
	}
	kc, err := c.ServiceAccountKubeconfig(ctx, namespace, saName)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// grantCapacity adds what --enable-capacity needs beyond deploy/rbac/csi-provisioner.yaml, which has exactly
// upstream's default RBAC: a user enabling capacity adds the same (with --capacity-ownerref-level=-1 no owner
// lookups, so no pods or apps rules).
func grantCapacity(t testing.TB, ctx context.Context, kube kubernetes.Interface) {
	t.Helper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "stowage-csi-provisioner-capacity", Namespace: namespace},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"storage.k8s.io"}, Resources: []string{"csistoragecapacities"},
			Verbs: []string{"list", "create", "update", "delete"},
		}},
	}
	if _, err := kube.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: namespace},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: saName, Namespace: namespace}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
	}
	if _, err := kube.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// process is one running csi-provisioner.
type process struct {
	*rig.Process
	httpURL string
}

// startProvisioner runs csi-provisioner with the given kubeconfig and CSI endpoint plus extra flags, with leader
// election on (short lease, so a replacement for a killed process takes over quickly) and an HTTP endpoint.
// It is killed when t ends; its log is printed if t failed.
func startProvisioner(t testing.TB, kubeconfig, endpoint string, extra ...string) *process {
	t.Helper()
	return startProvisionerAt(t, provisionerBinary(t), kubeconfig, endpoint, extra...)
}

// startProvisionerAt runs the csi-provisioner at path (Stowage's or upstream's) as startProvisioner does.
func startProvisionerAt(t testing.TB, path, kubeconfig, endpoint string, extra ...string) *process {
	t.Helper()
	addr := rig.FreeAddr(t)
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--csi-address=" + endpoint,
		"--leader-election", "--leader-election-namespace=" + namespace,
		"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=1s",
		"--http-endpoint=" + addr,
		"--retry-interval-start=200ms", "--retry-interval-max=10s",
		"-v=2",
	}, extra...)
	proc, err := rig.Start(rig.Spec{
		Name: "csi-provisioner", Path: path, Args: args, LogDir: t.TempDir(),
		// NAMESPACE is what a pod spec passes down for --enable-capacity.
		Env: append(os.Environ(), "NAMESPACE="+namespace),
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &process{Process: proc, httpURL: "http://" + addr}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("csi-provisioner (pid %d) log:\n%s", p.Pid(), p.Tail(300))
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *process) kill() {
	p.Signal(syscall.SIGKILL)
	<-p.Done()
}

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

// adminClient is the cluster's admin clientset with limits high enough that the test itself never throttles.
func adminClient(t testing.TB, c *cluster.Cluster) kubernetes.Interface {
	t.Helper()
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst = 1000, 2000
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kube
}
