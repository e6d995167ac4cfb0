//go:build bench

package resizer

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// TestBenchResizeStorm binds 300 claims of the instant mock driver, starts csi-resizer, then asks every claim
// for 2Gi at once and measures the seconds until all of them wait for the node (the resizer's part is done:
// ControllerExpandVolume, the volume's capacity, the claim's status) and the resizer's API writes per resize,
// counted from kube-apiserver's audit log, and the driver's ControllerExpandVolume and ControllerGetCapabilities
// calls (the latter once, when the process starts: upstream makes one more per resize). It runs once with
// upstream's default flags and once with Stowage's. RESIZE_STORM_N overrides the number of claims.
func TestBenchResizeStorm(t *testing.T) {
	n := e2erig.EnvCount(t, "RESIZE_STORM_N", 300)
	r := startRig(t)
	admin, err := kubernetes.NewForConfig(func() *rest.Config {
		c := r.Cluster.RESTConfig()
		c.QPS, c.Burst = 500, 1000
		return c
	}())
	if err != nil {
		t.Fatal(err)
	}
	runs := []struct {
		name string
		args []string
	}{
		{"upstream defaults: --kube-api-qps=5 --kube-api-burst=10 --workers=10", []string{"--kube-api-qps=5", "--kube-api-burst=10", "--workers=10"}},
		{"Stowage defaults", nil},
	}
	type row struct {
		name      string
		seconds   float64
		writes    int
		conflicts int
		expands   int
		getCaps   int
	}
	var rows []row
	for i, run := range runs {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
		ns := fmt.Sprintf("storm%d", i)
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, ctx, admin, ns)
		createAll(t, ctx, n, func(ctx context.Context, j int) error {
			name := fmt.Sprintf("%s-%d", ns, j)
			vol := f.drv.AddVolume(name, 1<<30)
			if _, err := admin.CoreV1().PersistentVolumes().Create(ctx, classPV(name, f.class, f.driver, vol.ID), metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := admin.CoreV1().PersistentVolumeClaims(ns).Create(ctx, classClaim(ns, name, f.class, name), metav1.CreateOptions{})
			return err
		})
		e2erig.Eventually(t, ctx, 20*time.Minute, fmt.Sprintf("%d claims in %s bound", n, ns), func(ctx context.Context) (bool, error) {
			done, err := countClaims(ctx, admin, ns, func(c *corev1.PersistentVolumeClaim) bool { return c.Status.Phase == corev1.ClaimBound })
			return done == n, err
		})
		p := r.startResizer(t, ns, f.drv.Endpoint(), append([]string{"--leader-election", "--v=1"}, run.args...)...)
		e2erig.Eventually(t, ctx, 5*time.Minute, "csi-resizer leading with its caches synced", func(context.Context) (bool, error) {
			return logContains(p, "Caches synced"), nil
		})

		before := len(r.resizerWrites(t))
		start := time.Now()
		createAll(t, ctx, n, func(ctx context.Context, j int) error {
			_, err := admin.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, fmt.Sprintf("%s-%d", ns, j), types.MergePatchType,
				[]byte(`{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`), metav1.PatchOptions{})
			return err
		})
		e2erig.Eventually(t, ctx, 30*time.Minute, fmt.Sprintf("%s: all %d claims expanded in the controller", run.name, n), func(ctx context.Context) (bool, error) {
			done, err := countClaims(ctx, admin, ns, func(c *corev1.PersistentVolumeClaim) bool {
				return c.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimNodeResizePending
			})
			return done == n, err
		})
		elapsed := time.Since(start)
		res := row{name: run.name, seconds: elapsed.Seconds(), expands: f.drv.Calls("/csi.v1.Controller/ControllerExpandVolume"),
			getCaps: f.drv.Calls("/csi.v1.Controller/ControllerGetCapabilities")}
		for _, w := range r.resizerWrites(t)[before:] {
			if w.Code == 409 {
				res.conflicts++
				continue
			}
			res.writes++
		}
		rows = append(rows, res)
		p.Signal(syscall.SIGTERM)
		_ = p.Wait(ctx)
		f.drv.Stop()
		cancel()
	}
	fmt.Printf("\nResize storm: %d claims asking for 2Gi at once, instant CSI driver (csimock), real kube-apiserver\n", n)
	fmt.Printf("%-72s %10s %12s %14s %10s %16s %16s\n", "csi-resizer flags", "seconds", "API writes", "writes/resize", "409s", "ControllerExpand", "GetCapabilities")
	for _, r := range rows {
		fmt.Printf("%-72s %10.1f %12d %14.2f %10d %16d %16d\n", r.name, r.seconds, r.writes, float64(r.writes)/float64(n), r.conflicts, r.expands, r.getCaps)
	}
	fmt.Printf("(upstream external-resizer, from its code: 3 writes per resize (claim status, volume, claim status) and a ControllerGetCapabilities per resize; not run here: its module is refused by the module proxy)\n\n")
}

// createAll runs create(0..n-1) on 16 goroutines.
func createAll(t *testing.T, ctx context.Context, n int, create func(context.Context, int) error) {
	t.Helper()
	if err := e2erig.Parallel(n, 16, func(j int) error { return create(ctx, j) }); err != nil {
		t.Fatalf("creating objects: %v", err)
	}
}

// countClaims counts the claims of ns for which cond holds.
func countClaims(ctx context.Context, client kubernetes.Interface, ns string, cond func(*corev1.PersistentVolumeClaim) bool) (int, error) {
	list, err := client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		if cond(&list.Items[i]) {
			n++
		}
	}
	return n, nil
}

// logContains reports whether the process's log holds s.
func logContains(p *e2erig.Process, s string) bool {
	data, err := os.ReadFile(p.LogPath)
	return err == nil && strings.Contains(string(data), s)
}
