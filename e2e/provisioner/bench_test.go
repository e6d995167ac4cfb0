//go:build bench

package provisioner

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/cluster"
	"github.com/stowage-csi/stowage/e2e/csimock"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// TestBenchProvisionStorm creates N PVCs (default 1000, STOWAGE_BENCH_PVCS) at once against a real API server
// with an instant CSI driver, and measures the seconds until all are Bound and the API requests csi-provisioner
// sent per PVC (through a counting proxy; Lease renewals excluded), at upstream's default client limits
// (--kube-api-qps=5 --kube-api-burst=10) and at Stowage's defaults. kube-controller-manager gets high limits so
// its binder is not what is measured.
func TestBenchProvisionStorm(t *testing.T) {
	n := rig.EnvCount(t, "STOWAGE_BENCH_PVCS", 1000)
	runs := []struct {
		name  string
		flags []string
	}{
		{"upstream defaults (qps 5, burst 10)", []string{"--kube-api-qps=5", "--kube-api-burst=10"}},
		{"Stowage defaults (qps 20, burst 100)", nil},
	}
	results := make([]stormResult, len(runs))
	for i, run := range runs {
		t.Run(run.name, func(t *testing.T) { results[i] = runStorm(t, n, run.flags) })
	}
	fmt.Printf("\ncsi-provisioner provision storm: %d PVCs, Immediate binding, instant CSI driver, real kube-apiserver\n", n)
	fmt.Printf("%-38s %12s %9s %14s %12s %12s %11s\n", "client limits", "s to Bound", "PVCs/s", "requests/PVC", "writes/PVC", "events/PVC", "GETs/PVC")
	for i, r := range results {
		rate := 0.0
		if r.seconds > 0 {
			rate = float64(n) / r.seconds
		}
		fmt.Printf("%-38s %12.1f %9.1f %14.2f %12.2f %12.2f %11.2f\n", runs[i].name, r.seconds, rate, r.requests, r.writes, r.events, r.reads)
	}
	fmt.Println("writes: PVC intent update, PV create, intent release; events: Provisioning + ProvisioningSucceeded (own client).")
}

// stormResult is one run's seconds to Bound and requests per claim.
type stormResult struct {
	seconds                         float64
	requests, writes, events, reads float64
}

// runStorm starts a control plane and csi-provisioner with flags behind a counting proxy, creates n claims at
// once and measures until all are bound and their intents released.
func runStorm(t *testing.T, n int, flags []string) stormResult {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{ControllerManagerArgs: []string{"--kube-api-qps=1000", "--kube-api-burst=2000"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	kube := adminClient(t, c)
	drv, err := csimock.Start(ctx, csimock.Options{Name: driverName})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	createClass(t, ctx, kube, storageClass("storm", storagev1.VolumeBindingImmediate, nil))
	ns := "storm"
	createNamespace(t, ctx, kube, ns)
	kc, counter := countingKubeconfig(t, serviceAccountKubeconfig(t, c))
	p := startProvisioner(t, kc, drv.Endpoint(), flags...)
	rig.Eventually(t, ctx, 2*time.Minute, "provisioner caches synced", func(ctx context.Context) (bool, error) {
		return p.logContains("Caches synced"), nil
	})
	time.Sleep(time.Second)
	base := [4]int64{counter.total.Load(), counter.writes.Load(), counter.events.Load(), counter.watches.Load()}

	start := time.Now()
	if err := rig.Parallel(n, 32, func(i int) error {
		_, err := kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim(ns, fmt.Sprintf("pvc-%04d", i), "storm", "1Gi"), metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitAllClaims(t, ctx, kube, ns, n, 24*time.Minute, fmt.Sprintf("%d claims bound", n), func(c v1.PersistentVolumeClaim) bool { return c.Status.Phase == v1.ClaimBound })
	elapsed := time.Since(start)
	// Count the whole job: wait for the last releases of the provisioning intent (throttled writes that may
	// trail the binding).
	waitAllClaims(t, ctx, kube, ns, n, 20*time.Minute, "intents released", func(c v1.PersistentVolumeClaim) bool { return !slices.Contains(c.Finalizers, intentKey) })
	time.Sleep(time.Second)
	total := counter.total.Load() - base[0]
	writes := counter.writes.Load() - base[1]
	events := counter.events.Load() - base[2]
	watches := counter.watches.Load() - base[3]
	if vols := len(drv.Volumes()); vols != n {
		t.Errorf("driver holds %d volumes for %d claims", vols, n)
	}
	fn := float64(n)
	return stormResult{
		seconds: elapsed.Seconds(), requests: float64(total) / fn, writes: float64(writes-events) / fn,
		events: float64(events) / fn, reads: float64(total-writes-watches) / fn,
	}
}

// waitAllClaims waits until the n claims in ns are all as ok wants them.
func waitAllClaims(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns string, n int, timeout time.Duration, what string, ok func(v1.PersistentVolumeClaim) bool) {
	t.Helper()
	rig.Eventually(t, ctx, timeout, what, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil || len(list.Items) != n {
			return false, err
		}
		for _, c := range list.Items {
			if !ok(c) {
				return false, nil
			}
		}
		return true, nil
	})
}
