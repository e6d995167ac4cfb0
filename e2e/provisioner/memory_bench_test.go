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

// TestBenchProvisionerMemory measures the resident memory (after the initial sync, and its peak) and the time
// from start to synced caches of Stowage's csi-provisioner and of the real upstream one
// (external-provisioner, built from its module at the version e2e/tools pins), each at its own default
// flags, with N PVCs of its StorageClass and their N PVs in its informer caches, against a baseline with
// none, on one control plane. The objects are created as a finished provisioning leaves them (PV named
// pvc-<claim UID> with claimRef, provisioned-by annotation and finalizer; claim with volumeName and the
// binder's annotations; both Bound), and kube-controller-manager's PV binder is off so nothing rewrites them:
// the sidecar has nothing to do after its initial LIST, and the reading is the cost of its caches, taken once
// the process is idle. Each figure is the median of STOWAGE_MEMORY_ROUNDS fresh starts; STOWAGE_MEMORY_N
// lists the counts (see rig.MemoryCounts). PROVISIONER_MEMORY_HEAP_PROFILE=<file> also writes the in-use heap
// profile of Stowage's provisioner at the last count there, and upstream's to <file>.upstream
// (go tool pprof -top -sample_index=inuse_space <file>).
func TestBenchProvisionerMemory(t *testing.T) {
	counts, rounds := rig.MemoryCounts(t), rig.MemoryRounds(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
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
	measure := func(objects int) []rig.MemoryRow {
		return []rig.MemoryRow{
			measureProvisioner(t, ctx, r, drv.Endpoint(), objects, rounds),
			measureUpstreamProvisioner(t, ctx, r, upstream, drv.Endpoint(), objects, rounds),
		}
	}

	floor, err := rig.FloorClient(r.Cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	rows, floors := rig.MemoryGrowth{Counts: counts, Measure: measure, Grow: func(from, to int) {
		start := time.Now()
		createBound(t, ctx, kube, ns, class, from, to)
		fmt.Printf("created %d bound PVC/PV pairs (%d requests) in %.0f s\n", to-from, 5*(to-from), time.Since(start).Seconds())
	}, Lists: []func(context.Context) error{
		rig.FloorList(floor.CoreV1().PersistentVolumeClaims("").List),
		rig.FloorList(floor.CoreV1().PersistentVolumes().List),
		rig.FloorList(floor.StorageV1().StorageClasses().List),
	}}.Run(t, ctx)
	if calls := drv.Calls(csimock.CreateVolume) + drv.Calls(csimock.DeleteVolume); calls != 0 {
		t.Errorf("%d CreateVolume/DeleteVolume calls for claims created bound, want none: the sidecar was not idle", calls)
	}

	if path := os.Getenv("PROVISIONER_MEMORY_HEAP_PROFILE"); path != "" {
		writeHeapProfile(t, ctx, r, sidecarrig.Binary(t, sidecarrig.Provisioner()), "Caches synced", path, drv.Endpoint())
		writeHeapProfile(t, ctx, r, upstream, upstreamProvisionerReady, path+".upstream", drv.Endpoint())
	}

	fmt.Println("\ncsi-provisioner: objects = bound PVCs of its StorageClass, each with its PV, real kube-apiserver, each at its default flags")
	rig.WriteMemoryTable(os.Stdout, rows, func(string) string { return upstreamProvisioner })
	rig.WriteListFloor(os.Stdout, "a plain protobuf client's LISTs of claims, PersistentVolumes and StorageClasses", floors)
	fmt.Printf("%s; synced: from the exec to \"Caches synced\" (Stowage) or \"%s\" (upstream, logged once its informers synced).\n\n", rig.MemoryLegend(rounds), upstreamProvisionerReady)
}

const (
	// upstreamProvisioner names upstream's rows.
	upstreamProvisioner = "csi-provisioner v6.4.0"
	// upstreamProvisionerReady is what upstream's csi-provisioner logs once its informers synced and its
	// workers run.
	upstreamProvisionerReady = "Started provisioner controller"
)

// createBound creates claims from to to-1 in ns and a PV bound to each, with both statuses Bound, on 32
// goroutines.
func createBound(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns, class string, from, to int) {
	t.Helper()
	err := rig.Parallel(to-from, 32, func(i int) error {
		return createBoundPair(ctx, kube, ns, class, fmt.Sprintf("pvc-mem-%06d", from+i))
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

// measureProvisioner measures Stowage's csi-provisioner once its caches hold objects (see rig.MeasureSidecar).
func measureProvisioner(t *testing.T, ctx context.Context, r *sidecarrig.Rig, endpoint string, objects, rounds int) rig.MemoryRow {
	t.Helper()
	return rig.MeasureSidecar(t, ctx, "csi-provisioner Stowage", objects, rounds, func(int) *rig.Process {
		return startProvisioner(t, r, endpoint).Process
	})
}

// measureUpstreamProvisioner measures upstream's csi-provisioner at path as measureProvisioner does.
func measureUpstreamProvisioner(t *testing.T, ctx context.Context, r *sidecarrig.Rig, path, endpoint string, objects, rounds int) rig.MemoryRow {
	t.Helper()
	return rig.MeasureUpstreamSidecar(t, ctx, upstreamProvisioner, upstreamProvisionerReady, objects, rounds, func(int) *rig.Process {
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
