//go:build bench

package provisioner

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/csimock"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// memoryRounds is how many fresh starts each memory figure is the median of.
const memoryRounds = 3

// TestBenchProvisionerMemory measures the resident memory of Stowage's csi-provisioner and of the real upstream
// one (external-provisioner, built from its module at the version e2e/tools pins), each at its own default
// flags, with 10,000 PVCs of its StorageClass and their 10,000 PVs in its informer caches, against a
// baseline with none, on one control plane. The objects are
// created as a finished provisioning leaves them (PV named pvc-<claim UID> with claimRef, provisioned-by
// annotation and finalizer; claim with volumeName and the binder's annotations; both Bound), and
// kube-controller-manager's PV binder is off so nothing rewrites them: the sidecar has nothing to do after
// its initial LIST, and the reading is the cost of its caches, taken once the process is idle. Each figure
// is the median of memoryRounds fresh starts. PROVISIONER_MEMORY_N overrides the number of claims;
// PROVISIONER_MEMORY_HEAP_PROFILE=<file> also writes the in-use heap profile of Stowage's provisioner at N
// objects there, and upstream's to <file>.upstream (go tool pprof -top -sample_index=inuse_space <file>).
func TestBenchProvisionerMemory(t *testing.T) {
	n := rig.EnvCount(t, "PROVISIONER_MEMORY_N", 10000)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	r := startRig(t, sidecarrig.Options{ControllerManagerArgs: []string{"--controllers=*,-persistentvolume-binder-controller"}})
	kube := adminClient(t, r)
	drv, err := csimock.Start(ctx, csimock.Options{Name: driverName})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	const class, ns = "memory", "memory"
	createClass(t, ctx, kube, storageClass(class, storagev1.VolumeBindingImmediate, nil))
	createNamespace(t, ctx, kube, ns)
	upstream := sidecarrig.Upstream(t, sidecarrig.Provisioner())

	var rows []rig.MemoryRow
	rows = append(rows, measureProvisioner(t, ctx, r, drv.Endpoint(), 0), measureUpstreamProvisioner(t, ctx, r, upstream, drv.Endpoint(), 0))

	start := time.Now()
	createBound(t, ctx, kube, ns, class, n)
	fmt.Printf("\ncreated %d bound PVC/PV pairs (%d requests) in %.0f s\n", n, 5*n, time.Since(start).Seconds())

	rows = append(rows, measureProvisioner(t, ctx, r, drv.Endpoint(), n), measureUpstreamProvisioner(t, ctx, r, upstream, drv.Endpoint(), n))
	if calls := drv.Calls(csimock.CreateVolume) + drv.Calls(csimock.DeleteVolume); calls != 0 {
		t.Errorf("%d CreateVolume/DeleteVolume calls for claims created bound, want none: the sidecar was not idle", calls)
	}

	if path := os.Getenv("PROVISIONER_MEMORY_HEAP_PROFILE"); path != "" {
		writeHeapProfile(t, ctx, r, sidecarrig.Binary(t, sidecarrig.Provisioner()), "Caches synced", path, drv.Endpoint())
		writeHeapProfile(t, ctx, r, upstream, "Started provisioner controller", path+".upstream", drv.Endpoint())
	}

	fmt.Println("\ncsi-provisioner memory: objects = bound PVCs of its StorageClass, each with its PV, real kube-apiserver, each at its default flags")
	rig.WriteMemoryTable(os.Stdout, rows)
	fmt.Printf("RSS: VmRSS once idle after the initial LIST; peak: VmHWM (the initial LIST and decode); medians of %d fresh starts; per 1,000: RSS growth over the empty row.\n", memoryRounds)
	fmt.Printf("RSS at %d objects, Stowage / upstream: %.2fx (peak %.2fx)\n", n, float64(rows[2].RSS)/float64(rows[3].RSS), float64(rows[2].Peak)/float64(rows[3].Peak))
	fmt.Println()
}

// createBound creates n claims in ns and a PV bound to each, with both statuses Bound, on 16 goroutines.
func createBound(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns, class string, n int) {
	t.Helper()
	err := rig.Parallel(n, 16, func(i int) error {
		return createBoundPair(ctx, kube, ns, class, fmt.Sprintf("pvc-mem-%05d", i))
	})
	if err != nil {
		t.Fatalf("creating bound claims: %v", err)
	}
}

// createBoundPair writes one claim and its PV the way provisioning and binding leave them.
func createBoundPair(ctx context.Context, kube kubernetes.Interface, ns, class, name string) error {
	pvc := claim(ns, name, class, "1Gi")
	pvc.Annotations = map[string]string{
		"pv.kubernetes.io/bind-completed":               "yes",
		"pv.kubernetes.io/bound-by-controller":          "yes",
		"volume.kubernetes.io/storage-provisioner":      driverName,
		"volume.beta.kubernetes.io/storage-provisioner": driverName,
	}
	created, err := kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	pvName := "pvc-" + string(created.UID)
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        pvName,
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": driverName},
			Finalizers:  []string{pvFinalizer},
		},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
			StorageClassName:              class,
			VolumeMode:                    func() *v1.PersistentVolumeMode { m := v1.PersistentVolumeFilesystem; return &m }(),
			ClaimRef: &v1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: name,
				UID: created.UID, ResourceVersion: created.ResourceVersion,
			},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: driverName, VolumeHandle: "vol-" + name, FSType: "ext4",
				VolumeAttributes: map[string]string{"storage.kubernetes.io/csiProvisionerIdentity": "1763690000000-1234-" + driverName},
			}},
		},
	}
	createdPV, err := kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	// The API server ignores status on create; the binder (off here) would set both.
	createdPV.Status.Phase = v1.VolumeBound
	if _, err := kube.CoreV1().PersistentVolumes().UpdateStatus(ctx, createdPV, metav1.UpdateOptions{}); err != nil {
		return err
	}
	created.Spec.VolumeName = pvName
	updated, err := kube.CoreV1().PersistentVolumeClaims(ns).Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	updated.Status = v1.PersistentVolumeClaimStatus{
		Phase:       v1.ClaimBound,
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		Capacity:    v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
	}
	_, err = kube.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	return err
}

// measureProvisioner measures csi-provisioner's memory once its caches hold objects (see rig.MeasureSidecar).
func measureProvisioner(t *testing.T, ctx context.Context, r *sidecarrig.Rig, endpoint string, objects int) rig.MemoryRow {
	t.Helper()
	return rig.MeasureSidecar(t, ctx, "Stowage", objects, memoryRounds, func(int) *rig.Process {
		return startProvisioner(t, r, endpoint).Process
	})
}

// measureUpstreamProvisioner measures upstream's csi-provisioner at path as measureProvisioner does; it logs
// "Started provisioner controller" once its informers synced and its workers run.
func measureUpstreamProvisioner(t *testing.T, ctx context.Context, r *sidecarrig.Rig, path, endpoint string, objects int) rig.MemoryRow {
	t.Helper()
	return rig.MeasureUpstreamSidecar(t, ctx, "upstream v6.4.0", "Started provisioner controller", objects, memoryRounds, func(int) *rig.Process {
		return startProvisionerAt(t, r, path, endpoint).Process
	})
}

// writeHeapProfile starts the csi-provisioner at path with --enable-pprof, waits until it logged ready and is
// idle, and writes its heap profile (after a GC, so it shows what is live) to file.
func writeHeapProfile(t *testing.T, ctx context.Context, r *sidecarrig.Rig, path, ready, file, endpoint string) {
	t.Helper()
	p := startProvisionerAt(t, r, path, endpoint, "--enable-pprof")
	rig.Eventually(t, ctx, 5*time.Minute, "csi-provisioner to log "+ready, func(context.Context) (bool, error) {
		return p.logContains(ready), nil
	})
	if _, err := rig.WaitIdle(ctx, p.Pid(), 3*time.Second, 3); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.httpURL+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("heap profile: %s %v", resp.Status, err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("heap profile of %s at %s", path, file)
	p.kill()
}
