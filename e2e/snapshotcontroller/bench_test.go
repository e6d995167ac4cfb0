//go:build bench

package snapshotcontroller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// TestBenchSnapshotStorm creates N VolumeSnapshots of N bound claims at once against the instant mock driver,
// starts a snapshot-controller and a csi-snapshotter, and measures the seconds until all are readyToUse (from
// the processes' start, so start-up and the initial LISTs are included), then deletes them all at once and
// measures the seconds until every VolumeSnapshot and content is gone; and the API writes per snapshot of the
// two binaries, from the audit log. Upstream's pair (external-snapshotter v8.7.0) runs at its defaults, whose
// client limits (--kube-api-qps=5 --kube-api-burst=10) are also "the same flags"; the Stowage pair runs at those
// flags and at its own defaults. Leader election is off in all runs so no run waits for its predecessor's Lease.
// SNAPSHOT_STORM_N overrides N (200).
func TestBenchSnapshotStorm(t *testing.T) {
	n := e2erig.EnvCount(t, "SNAPSHOT_STORM_N", 200)
	r := startRig(t, false)
	admin, snaps := benchClients(t, r, 500, 1000)
	stowage, upstream := stowageBinaries(t), upstreamBinaries(t)
	drv := startDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	claims := benchClaims(t, ctx, admin, drv.Name(), n, func(j int) string { return drv.AddVolume(fmt.Sprintf("storm-%d", j), 1<<30).ID })
	class := &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "storm"}, Driver: drv.Name(), DeletionPolicy: snapv1.VolumeSnapshotContentDelete}
	if _, err := snaps.SnapshotV1().VolumeSnapshotClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	sameFlags := []string{"--kube-api-qps=5", "--kube-api-burst=10"}
	runs := []struct {
		name  string
		bins  binaries
		flags []string
	}{
		{"upstream, its defaults (qps 5, burst 10)", upstream, nil},
		{"Stowage, same flags (qps 5, burst 10)", stowage, sameFlags},
		{"Stowage, its defaults", stowage, nil},
	}
	type row struct {
		name                   string
		ready, deleted         float64
		writes, writesPerSnap  float64
		controller, sidecar    int
		driverCreate, conflict int
		// deletes: the delete phase's writes per snapshot, by writer and request ("patch volumesnapshots").
		deletes map[string]float64
	}
	var rows []row
	for i, run := range runs {
		prefix := fmt.Sprintf("s%d-", i)
		if err := e2erig.Parallel(n, 16, func(j int) error {
			claim, cls := claims[j], class.Name
			_, err := snaps.SnapshotV1().VolumeSnapshots(testNamespace).Create(ctx, &snapv1.VolumeSnapshot{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%d", prefix, j), Namespace: testNamespace},
				Spec: snapv1.VolumeSnapshotSpec{VolumeSnapshotClassName: &cls,
					Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim}},
			}, metav1.CreateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		before := len(r.Audit.MustWrites(t))
		creates := drv.Calls("/csi.v1.Controller/CreateSnapshot")
		start := time.Now()
		extra := append([]string{"--leader-election=false"}, run.flags...)
		ctrl := r.startController(t, fmt.Sprintf("snapshot-controller-%d", i), run.bins.controller, extra...)
		side := r.startSnapshotter(t, fmt.Sprintf("csi-snapshotter-%d", i), run.bins.snapshotter, drv.Endpoint(), extra...)
		e2erig.Eventually(t, ctx, 30*time.Minute, fmt.Sprintf("%s: %d VolumeSnapshots ready", run.name, n), func(ctx context.Context) (bool, error) {
			ready, err := countReady(ctx, snaps, prefix)
			return err == nil && ready == n, err
		})
		res := row{name: run.name, ready: time.Since(start).Seconds(), deletes: map[string]float64{}}
		deleteFrom := len(r.Audit.MustWrites(t))
		start = time.Now()
		if err := e2erig.Parallel(n, 16, func(j int) error {
			return snaps.SnapshotV1().VolumeSnapshots(testNamespace).Delete(ctx, fmt.Sprintf("%s%d", prefix, j), metav1.DeleteOptions{})
		}); err != nil {
			t.Fatal(err)
		}
		e2erig.Eventually(t, ctx, 30*time.Minute, fmt.Sprintf("%s: every VolumeSnapshot and content gone", run.name), func(ctx context.Context) (bool, error) {
			vs, err := snaps.SnapshotV1().VolumeSnapshots(testNamespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			contents, err := snaps.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
			return err == nil && len(vs.Items) == 0 && len(contents.Items) == 0 && len(drv.Snapshots()) == 0, err
		})
		res.deleted = time.Since(start).Seconds()
		for _, w := range r.Audit.MustWrites(t)[before:] {
			switch w.User {
			case controllerUser:
				res.controller++
			case snapshotterUser:
				res.sidecar++
			default:
				continue
			}
			if w.Code == 409 {
				res.conflict++
			}
		}
		for _, w := range r.Audit.MustWrites(t)[deleteFrom:] {
			if who := map[string]string{controllerUser: "snapshot-controller", snapshotterUser: "csi-snapshotter"}[w.User]; who != "" {
				res.deletes[fmt.Sprintf("%s: %s %s", who, w.Verb, w.Resource)] += 1 / float64(n)
			}
		}
		res.writes = float64(res.controller + res.sidecar)
		res.writesPerSnap = res.writes / float64(n)
		res.driverCreate = drv.Calls("/csi.v1.Controller/CreateSnapshot") - creates
		rows = append(rows, res)
		for _, p := range []*e2erig.Process{ctrl, side} {
			p.Signal(syscall.SIGTERM)
			if err := p.Wait(ctx); err != nil {
				t.Logf("%s: exit after SIGTERM: %v", run.name, err)
			}
		}
	}
	fmt.Printf("\nSnapshot storm: %d VolumeSnapshots created at once, then deleted at once; instant CSI driver (csimock), real kube-apiserver\n", n)
	fmt.Printf("%-42s %9s %9s %12s %10s %12s %12s %6s %8s\n", "pair", "ready s", "delete s", "API writes", "per snap", "controller", "csi-snapsh.", "409s", "creates")
	for _, r := range rows {
		fmt.Printf("%-42s %9.1f %9.1f %12.0f %10.2f %12d %12d %6d %8d\n", r.name, r.ready, r.deleted, r.writes, r.writesPerSnap, r.controller, r.sidecar, r.conflict, r.driverCreate)
	}
	// What bounds the delete phase at qps 5: each binary's snapshot clientset has a token bucket of its own
	// (claims go through another clientset), so a writer's snapshot API requests per deleted snapshot times n
	// over 5 per second is the floor that bucket puts on the phase.
	fmt.Printf("\nDelete phase: writes per deleted snapshot, by writer and request (audit log)\n")
	for _, r := range rows {
		fmt.Printf("%s (%.1f s):\n", r.name, r.deleted)
		snapshotAPI := map[string]float64{}
		for _, k := range slices.Sorted(maps.Keys(r.deletes)) {
			fmt.Printf("  %-62s %6.2f\n", k, r.deletes[k])
			if who, req, _ := strings.Cut(k, ": "); strings.Contains(req, " volumesnapshot") {
				snapshotAPI[who] += r.deletes[k]
			}
		}
		for _, who := range slices.Sorted(maps.Keys(snapshotAPI)) {
			fmt.Printf("  %-62s %6.2f  (at 5/s: %.0f s for %d)\n", who+": snapshot API writes", snapshotAPI[who], snapshotAPI[who]*float64(n)/5, n)
		}
	}
	fmt.Println()
}

// benchClaims makes n claims bound to static volumes of the driver (their handles from handle) and waits until
// all are Bound.
func benchClaims(t *testing.T, ctx context.Context, admin kubernetes.Interface, driver string, n int, handle func(int) string) []string {
	t.Helper()
	size := resource.MustParse("1Gi")
	empty := ""
	names := make([]string, n)
	if err := e2erig.Parallel(n, 16, func(j int) error {
		names[j] = fmt.Sprintf("storm-%d", j)
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv-" + names[j]},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle(j)}},
				ClaimRef:                      &corev1.ObjectReference{Namespace: testNamespace, Name: names[j]},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			},
		}
		if _, err := admin.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := admin.CoreV1().PersistentVolumeClaims(testNamespace).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: names[j], Namespace: testNamespace},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: pv.Name, StorageClassName: &empty,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			},
		}, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	e2erig.Eventually(t, ctx, 10*time.Minute, fmt.Sprintf("%d claims bound", n), func(ctx context.Context) (bool, error) {
		list, err := admin.CoreV1().PersistentVolumeClaims(testNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bound := 0
		for _, c := range list.Items {
			if c.Status.Phase == corev1.ClaimBound {
				bound++
			}
		}
		return bound == n, nil
	})
	return names
}

// countReady counts the VolumeSnapshots named with prefix that are readyToUse.
func countReady(ctx context.Context, snaps snapclient.Interface, prefix string) (int, error) {
	list, err := snaps.SnapshotV1().VolumeSnapshots(testNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	ready := 0
	for _, vs := range list.Items {
		if len(vs.Name) > len(prefix) && vs.Name[:len(prefix)] == prefix && vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse {
			ready++
		}
	}
	return ready, nil
}

// benchClients are admin clientsets of r's cluster at the benchmark's own client-side limits.
func benchClients(t *testing.T, r rig, qps float32, burst int) (kubernetes.Interface, snapclient.Interface) {
	t.Helper()
	cfg := r.Cluster.RESTConfig()
	cfg.QPS, cfg.Burst = qps, burst
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := snapclient.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return admin, snaps
}
