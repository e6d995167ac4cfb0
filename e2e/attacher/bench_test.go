//go:build bench

package attacher

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/stowage-csi/stowage/e2e/csimock"

	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// TestBenchAttachStorm creates 1000 VolumeAttachments (and their PersistentVolumes) at once, then starts
// csi-attacher against an instant CSI driver and measures the seconds until all are attached (from the
// process start, so start-up and the initial LIST are included) and the API writes per attach, counted
// from the audit log. It runs once with upstream's default flags and once with Stowage's.
// ATTACH_STORM_N overrides the number of VolumeAttachments.
func TestBenchAttachStorm(t *testing.T) {
	n := e2erig.EnvCount(t, "ATTACH_STORM_N", 1000)
	r := startRig(t)
	admin, err := kubernetes.NewForConfig(func() *rest.Config {
		c := r.cluster.RESTConfig()
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
		{"upstream defaults: --kube-api-qps=5 --kube-api-burst=10 --worker-threads=10", []string{"--kube-api-qps=5", "--kube-api-burst=10", "--worker-threads=10"}},
		{"Stowage defaults", nil},
	}
	type row struct {
		name         string
		seconds      float64
		writes       int
		publishes    int
		writesPerVA  float64
		patchesOnPVs int
	}
	var rows []row
	for i, run := range runs {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
		driver := fmt.Sprintf("storm%d.csi.stowage.io", i)
		node := fmt.Sprintf("node-storm%d", i)
		drv, err := csimock.Start(ctx, csimock.Options{Name: driver})
		if err != nil {
			t.Fatal(err)
		}
		createNode(t, ctx, admin, node, driver, "mock-"+node)
		prefix := fmt.Sprintf("storm%d-", i)
		createAll(t, ctx, n, func(ctx context.Context, j int) error {
			vol := drv.AddVolume(fmt.Sprintf("%spv-%d", prefix, j), 1<<30)
			if _, err := admin.CoreV1().PersistentVolumes().Create(ctx, csiPV(vol.Name, driver, vol.ID), metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := admin.StorageV1().VolumeAttachments().Create(ctx, directVA(fmt.Sprintf("%sva-%d", prefix, j), driver, vol.Name, node), metav1.CreateOptions{})
			return err
		})

		before := r.auditWrites(t, attacherUser)
		start := time.Now()
		p := r.startAttacher(t, fmt.Sprintf("storm%d", i), drv.Endpoint(), run.args...)
		e2erig.Eventually(t, ctx, 40*time.Minute, fmt.Sprintf("%s: all %d VolumeAttachments attached", run.name, n), func(ctx context.Context) (bool, error) {
			attached, _, err := attachedCount(ctx, admin, driver)
			return err == nil && attached == n, err
		})
		elapsed := time.Since(start)
		writes := since(before, r.auditWrites(t, attacherUser))
		res := row{name: run.name, seconds: elapsed.Seconds(), writes: len(writes), publishes: drv.Calls(csimock.ControllerPublishVolume)}
		for _, w := range writes {
			if strings.Contains(w, "persistentvolumes") {
				res.patchesOnPVs++
			}
		}
		res.writesPerVA = float64(res.writes) / float64(n)
		rows = append(rows, res)
		p.Signal(syscall.SIGTERM)
		_ = p.Wait(ctx)
		drv.Stop()
		cancel()
	}
	fmt.Printf("\nAttach storm: %d VolumeAttachments created at once, instant CSI driver (csimock), real kube-apiserver\n", n)
	fmt.Printf("%-78s %10s %12s %14s %10s %12s\n", "csi-attacher flags", "seconds", "API writes", "writes/attach", "PV writes", "publishes")
	for _, r := range rows {
		fmt.Printf("%-78s %10.1f %12d %14.2f %10d %12d\n", r.name, r.seconds, r.writes, r.writesPerVA, r.patchesOnPVs, r.publishes)
	}
	fmt.Printf("(upstream external-attacher: 3 writes per first attach: PV finalizer, VA finalizer, VA status)\n\n")
}

// createAll runs create(0..n-1) on 16 goroutines.
func createAll(t *testing.T, ctx context.Context, n int, create func(context.Context, int) error) {
	t.Helper()
	if err := e2erig.Parallel(n, 16, func(j int) error { return create(ctx, j) }); err != nil {
		t.Fatalf("creating objects: %v", err)
	}
}
