//go:build bench

package attacher

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

const (
	// settle is the pause between the attach and the detach storm, the same for both sidecars: long enough for
	// a client-side token bucket of burst 100 at 20 QPS to refill, so that the detach storm is measured as it
	// runs after any quiet moment, and not together with the tokens the attach storm has just used up.
	settle = 5 * time.Second
)

// TestBenchAttachStorm runs the real upstream csi-attacher (external-attacher, built from its module at the
// version e2e/tools pins) and Stowage's, back to back, each on a fresh control plane with an audit log,
// against an instant CSI driver: N VolumeAttachments (and their PersistentVolumes) exist before the sidecar
// starts; attach is timed from the process start (start-up and the initial LIST included) until all are
// attached, detach from the deletion of all of them (after a pause of settle) until all are gone. Both run at the same flags
// (--kube-api-qps=20 --kube-api-burst=100 --worker-threads=10) and each at its own defaults. API writes
// are counted from the audit log (VolumeAttachments and PersistentVolumes, the only objects either writes
// besides its Lease). The API server's own write limit is measured first, on a fresh control plane of its
// own, and each sidecar's write rate is printed as a fraction of it. ATTACH_STORM_N overrides N (1000).
func TestBenchAttachStorm(t *testing.T) {
	n := e2erig.EnvCount(t, "ATTACH_STORM_N", 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	upstream := sidecarrig.Upstream(t, sidecarrig.Attacher())
	limit := sidecarrig.MeasureWriteLimit(t, ctx, rigOptions())
	settings := []struct {
		name string
		args []string
	}{
		{"same flags (qps 20, burst 100, 10 workers)", []string{"--kube-api-qps=20", "--kube-api-burst=100", "--worker-threads=10"}},
		{"own defaults", nil},
	}
	var runs []e2erig.StormRun
	for _, s := range settings {
		for _, sc := range []struct {
			name     string
			upstream bool
		}{{"upstream v4.13.0", true}, {"Stowage", false}} {
			t.Run(s.name+"/"+sc.name, func(t *testing.T) {
				r := startRig(t)
				path := r.binary
				if sc.upstream {
					path = upstream
				}
				for _, run := range attachStorm(t, ctx, r, path, n, s.args) {
					run.Setting, run.Sidecar, run.Upstream = s.name, sc.name, sc.upstream
					runs = append(runs, run)
				}
			})
		}
	}
	fmt.Printf("\nAttach storm: %d VolumeAttachments, instant CSI driver (csimock), real kube-apiserver, a fresh control plane per row\n", n)
	fmt.Println(limit)
	e2erig.WriteStormTable(os.Stdout, runs, limit)
	fmt.Println("own defaults: upstream --kube-api-qps=5 --kube-api-burst=10 --worker-threads=10; Stowage no client-side limiter (the server has API Priority and Fairness), 10 workers.")
	fmt.Println("writes: to VolumeAttachments and PersistentVolumes by the sidecar's ServiceAccount, from the audit log (Lease renewals not included).")
	fmt.Println()
}

// attachStorm creates n PersistentVolumes and VolumeAttachments of a fresh driver, starts the csi-attacher at
// path with args and times the attach of all of them, then deletes them all and times the detach.
func attachStorm(t *testing.T, ctx context.Context, r *rig, path string, n int, args []string) []e2erig.StormRun {
	t.Helper()
	admin, err := kubernetes.NewForConfig(func() *rest.Config {
		c := r.Cluster.RESTConfig()
		c.QPS, c.Burst = -1, 0
		return c
	}())
	if err != nil {
		t.Fatal(err)
	}
	const driver, node = "storm.csi.stowage.io", "node-storm"
	drv, err := csimock.Start(ctx, csimock.Options{Name: driver})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	createNode(t, ctx, admin, node, driver, "mock-"+node)
	vaName := func(j int) string { return fmt.Sprintf("va-%05d", j) }
	createAll(t, ctx, n, func(ctx context.Context, j int) error {
		vol := drv.AddVolume(fmt.Sprintf("pv-%05d", j), 1<<30)
		if _, err := admin.CoreV1().PersistentVolumes().Create(ctx, csiPV(vol.Name, driver, vol.ID), metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := admin.StorageV1().VolumeAttachments().Create(ctx, directVA(vaName(j), driver, vol.Name, node), metav1.CreateOptions{})
		return err
	})

	before := r.attacherWrites(t)
	start := time.Now()
	p := r.startBinary(t, path, "storm", drv.Endpoint(), args...)
	e2erig.Eventually(t, ctx, 2*time.Hour, fmt.Sprintf("all %d VolumeAttachments attached", n), func(ctx context.Context) (bool, error) {
		attached, _, err := attachedCount(ctx, admin, driver)
		return err == nil && attached == n, err
	})
	attach := e2erig.StormRun{Phase: "attach", Objects: n, Seconds: time.Since(start).Seconds()}
	time.Sleep(settle) // trailing writes of the attach storm are counted with it
	afterAttach := r.attacherWrites(t)
	attach.Writes = len(since(before, afterAttach))

	start = time.Now()
	createAll(t, ctx, n, func(ctx context.Context, j int) error {
		err := admin.StorageV1().VolumeAttachments().Delete(ctx, vaName(j), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	e2erig.Eventually(t, ctx, 2*time.Hour, fmt.Sprintf("all %d VolumeAttachments detached and gone", n), func(ctx context.Context) (bool, error) {
		_, total, err := attachedCount(ctx, admin, driver)
		return err == nil && total == 0, err
	})
	detach := e2erig.StormRun{Phase: "detach", Objects: n, Seconds: time.Since(start).Seconds()}
	if got := drv.Calls(csimock.ControllerUnpublishVolume); got < n {
		t.Errorf("%d ControllerUnpublish calls for %d detached VolumeAttachments", got, n)
	}
	// Counted once the process is gone, so a write that trailed the last deletion is in the log too.
	p.Signal(syscall.SIGTERM)
	_ = p.Wait(ctx)
	detach.Writes = len(since(afterAttach, r.attacherWrites(t)))
	return []e2erig.StormRun{attach, detach}
}

// createAll runs create(0..n-1) on 32 goroutines.
func createAll(t *testing.T, ctx context.Context, n int, create func(context.Context, int) error) {
	t.Helper()
	if err := e2erig.Parallel(n, 32, func(j int) error { return create(ctx, j) }); err != nil {
		t.Fatalf("creating objects: %v", err)
	}
}
