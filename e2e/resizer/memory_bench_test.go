//go:build bench

package resizer

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// TestBenchResizerMemory measures the resident memory (after the initial sync, and its peak) and the time from
// start to synced caches of Stowage's csi-resizer at its default flags, with N claims of an expandable class
// and their N PVs in its informer caches, against a baseline with none. The objects are created as binding
// leaves them (claim with volumeName and Bound status at its requested 1Gi, PV with claimRef and Bound), with
// kube-controller-manager's binder off so nothing rewrites them: nothing is to be resized, the resizer is idle
// after its initial LIST (the audit log and the driver's ControllerExpandVolume count check it), and the
// reading is the cost of its caches. There is no upstream row: external-resizer's module is refused by the
// module proxy, so e2e/tools cannot build it. Each figure is the median of STOWAGE_MEMORY_ROUNDS fresh starts;
// STOWAGE_MEMORY_N lists the counts (see rig.MemoryCounts).
func TestBenchResizerMemory(t *testing.T) {
	counts, rounds := e2erig.MemoryCounts(t), e2erig.MemoryRounds(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	r := rig{sidecarrig.Start(t, sidecarrig.Options{Sidecars: []sidecarrig.Sidecar{sidecarrig.Resizer()},
		Audit:                 []string{"/persistentvolumeclaims", "/persistentvolumes"},
		ControllerManagerArgs: []string{"--controllers=*,-persistentvolume-binder-controller"}})}
	admin, err := kubernetes.NewForConfig(func() *rest.Config {
		c := r.Cluster.RESTConfig()
		c.QPS, c.Burst = 2000, 4000
		return c
	}())
	if err != nil {
		t.Fatal(err)
	}
	const ns = "memory"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, ctx, admin, ns)
	measure := func(objects int) []e2erig.MemoryRow {
		before := len(r.resizerWrites(t))
		row := e2erig.MeasureSidecar(t, ctx, "csi-resizer Stowage", objects, rounds, func(round int) *e2erig.Process {
			return r.startResizer(t, fmt.Sprintf("memory-%d-%d", objects, round), f.drv.Endpoint())
		})
		if writes := r.resizerWrites(t)[before:]; objects > 0 && len(writes) != 0 {
			t.Errorf("%d writes while measuring, the resizer was not idle; first: %s", len(writes), writes[0])
		}
		return []e2erig.MemoryRow{row}
	}

	floor, err := e2erig.FloorClient(r.Cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	rows, floors := e2erig.MemoryGrowth{Counts: counts, Measure: measure, Grow: func(from, to int) {
		start := time.Now()
		createAll(t, ctx, to-from, func(ctx context.Context, i int) error {
			return createBoundPair(ctx, admin, f, ns, fmt.Sprintf("mem-%06d", from+i))
		})
		fmt.Printf("created %d bound claims and PVs (%d requests) in %.0f s\n", to-from, 4*(to-from), time.Since(start).Seconds())
	}, Lists: []func(context.Context) error{
		e2erig.FloorList(floor.CoreV1().PersistentVolumeClaims("").List),
		e2erig.FloorList(floor.CoreV1().PersistentVolumes().List),
	}}.Run(t, ctx)
	if calls := f.drv.Calls("/csi.v1.Controller/ControllerExpandVolume"); calls != 0 {
		t.Errorf("%d ControllerExpandVolume calls for claims at their requested size, want none: the resizer was not idle", calls)
	}

	fmt.Println("\ncsi-resizer: objects = bound claims of an expandable class at their requested size, each with its PV, real kube-apiserver, default flags")
	e2erig.WriteMemoryTable(os.Stdout, rows, func(string) string { return "" })
	e2erig.WriteListFloor(os.Stdout, "a plain protobuf client's LISTs of claims and PersistentVolumes", floors)
	fmt.Printf("%s; synced: from the exec to \"Caches synced\"; no upstream row: external-resizer's module is refused by the module proxy.\n\n", e2erig.MemoryLegend(rounds))
}

// createBoundPair creates claim name in ns and its PV, bound both ways with Bound statuses, as the binder
// leaves them; the driver holds no volume for it, as nothing asks for one.
func createBoundPair(ctx context.Context, admin kubernetes.Interface, f *fixture, ns, name string) error {
	claim, err := admin.CoreV1().PersistentVolumeClaims(ns).Create(ctx, classClaim(ns, name, f.class, name), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	pv := classPV(name, f.class, f.driver, "vol-"+name)
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: name, UID: claim.UID}
	created, err := admin.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	// The API server drops status on create.
	created.Status.Phase = corev1.VolumeBound
	if _, err := admin.CoreV1().PersistentVolumes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return err
	}
	claim.Status = corev1.PersistentVolumeClaimStatus{
		Phase:       corev1.ClaimBound,
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
	}
	_, err = admin.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	return err
}
