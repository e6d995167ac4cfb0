//go:build bench

package snapshotcontroller

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// TestBenchSnapshotterMemory measures the resident memory of snapshot-controller and csi-snapshotter, Stowage's
// and upstream's (external-snapshotter v8.7.0), with N VolumeSnapshots and their N VolumeSnapshotContents in
// their informer caches, against a baseline with none. The objects are created as both pairs leave a dynamic
// snapshot that is done (finalizers, bound both ways, ready, with handles and sizes), of 100 bound claims, so
// neither binary has anything to do after its initial LIST: the reading is the cost of the caches, taken once
// the process is idle (the audit log and the driver's CreateSnapshot count check that nothing was written).
// Each figure is the median of rounds fresh starts, with leader election off.
// SNAPSHOTTER_MEMORY_N overrides N (10,000), SNAPSHOTTER_MEMORY_ROUNDS the rounds (3).
func TestBenchSnapshotterMemory(t *testing.T) {
	n := e2erig.EnvCount(t, "SNAPSHOTTER_MEMORY_N", 10000)
	rounds := e2erig.EnvCount(t, "SNAPSHOTTER_MEMORY_ROUNDS", 3)
	const claims = 100
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	r := startRig(t, false)
	admin, snaps := benchClients(t, r, 2000, 4000)
	stowage, upstream := stowageBinaries(t), upstreamBinaries(t)
	drv := startDriver(t)
	handles := make([]string, claims)
	names := benchClaims(t, ctx, admin, drv.Name(), claims, func(j int) string {
		handles[j] = drv.AddVolume(fmt.Sprintf("memory-%d", j), 1<<30).ID
		return handles[j]
	})
	class := &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "memory"}, Driver: drv.Name(), DeletionPolicy: snapv1.VolumeSnapshotContentDelete}
	if _, err := snaps.SnapshotV1().VolumeSnapshotClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	pairs := []struct {
		who  string
		bins binaries
		// sentinel is the log line each binary writes once its caches are synced (upstream's, at -v=4).
		controller, snapshotter string
	}{
		{"Stowage", stowage, "Caches synced", "Caches synced"},
		{"v8.7.0", upstream, "controller initialized", "controller initialized"},
	}
	measureAll := func(objects int) []e2erig.MemoryRow {
		var rows []e2erig.MemoryRow
		for _, p := range pairs {
			rows = append(rows, r.measure(t, ctx, "SC "+p.who, objects, rounds, p.controller, func(round int) *e2erig.Process {
				return r.startController(t, fmt.Sprintf("memory-sc-%s-%d-%d", p.who, objects, round), p.bins.controller, "--leader-election=false")
			}))
		}
		for _, p := range pairs {
			rows = append(rows, r.measure(t, ctx, "SS "+p.who, objects, rounds, p.snapshotter, func(round int) *e2erig.Process {
				return r.startSnapshotter(t, fmt.Sprintf("memory-ss-%s-%d-%d", p.who, objects, round), p.bins.snapshotter, drv.Endpoint(),
					"--leader-election=false", "--v=4")
			}))
		}
		return rows
	}
	rows := measureAll(0)

	start := time.Now()
	if err := e2erig.Parallel(n, 32, func(j int) error { return createDoneSnapshot(ctx, snaps, class, names[j%claims], handles[j%claims], j) }); err != nil {
		t.Fatalf("creating snapshots: %v", err)
	}
	fmt.Printf("\ncreated %d ready VolumeSnapshots and their bound contents (%d requests) in %.0f s\n", n, 4*n, time.Since(start).Seconds())

	creates := drv.Calls("/csi.v1.Controller/CreateSnapshot")
	before := len(r.Audit.MustWrites(t))
	rows = append(rows, measureAll(n)...)
	for _, w := range r.Audit.MustWrites(t)[before:] {
		if w.User == controllerUser || w.User == snapshotterUser {
			t.Errorf("write while measuring, the binaries were not idle: %s", w)
		}
	}
	if calls := drv.Calls("/csi.v1.Controller/CreateSnapshot") - creates; calls != 0 {
		t.Errorf("%d CreateSnapshot calls for snapshots created ready, want none: csi-snapshotter was not idle", calls)
	}

	fmt.Printf("\nsnapshot-controller (SC) and csi-snapshotter (SS) memory: objects = ready VolumeSnapshots, each with its bound content, of %d claims; real kube-apiserver, defaults but --leader-election=false (SS --v=4, SC --v=5 as upstream's manifest)\n", claims)
	e2erig.WriteMemoryTable(os.Stdout, rows)
	fmt.Printf("RSS: VmRSS once idle after the initial LIST; peak: VmHWM; medians of %d fresh starts; per 1,000: RSS growth over the empty row (which already caches the %d claims).\n\n", rounds, claims)
}

// createDoneSnapshot creates VolumeSnapshot mem-j of claim as a finished dynamic snapshot: both finalizers,
// class, status bound and ready; and its content snapcontent-<UID> bound to it with its finalizer and a ready
// status with a handle, as snapshot-controller and csi-snapshotter leave them.
func createDoneSnapshot(ctx context.Context, snaps snapclient.Interface, class *snapv1.VolumeSnapshotClass, claim, volume string, j int) error {
	api := snaps.SnapshotV1()
	vs, err := api.VolumeSnapshots(testNamespace).Create(ctx, &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mem-%05d", j), Namespace: testNamespace, Finalizers: []string{
			"snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection", "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"}},
		Spec: snapv1.VolumeSnapshotSpec{VolumeSnapshotClassName: &class.Name, Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	contentName := "snapcontent-" + string(vs.UID)
	handle, size, created, ready := fmt.Sprintf("snap-mem-%05d", j), int64(1<<30), time.Now(), true
	content, err := api.VolumeSnapshotContents().Create(ctx, &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: contentName, Finalizers: []string{"snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"}},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{Kind: "VolumeSnapshot", APIVersion: "snapshot.storage.k8s.io/v1",
				Namespace: vs.Namespace, Name: vs.Name, UID: vs.UID},
			Source:         snapv1.VolumeSnapshotContentSource{VolumeHandle: &volume},
			DeletionPolicy: class.DeletionPolicy, Driver: class.Driver, VolumeSnapshotClassName: &class.Name,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	// The API server drops status on create.
	content.Status = &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, RestoreSize: &size, ReadyToUse: &ready, CreationTime: new(created.UnixNano())}
	if _, err := api.VolumeSnapshotContents().UpdateStatus(ctx, content, metav1.UpdateOptions{}); err != nil {
		return err
	}
	vs.Status = &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &contentName, CreationTime: &metav1.Time{Time: created},
		ReadyToUse: &ready, RestoreSize: resource.NewQuantity(size, resource.BinarySI)}
	_, err = api.VolumeSnapshots(testNamespace).UpdateStatus(ctx, vs, metav1.UpdateOptions{})
	return err
}

// measure is rig.MeasureSidecar with the binary's own sentinel for synced caches (upstream's binaries log no
// "Caches synced"): rounds fresh starts, each read once the sentinel is logged and the process is idle, then
// stopped with SIGTERM; the row holds the medians.
func (r rig) measure(t *testing.T, ctx context.Context, name string, objects, rounds int, sentinel string, start func(round int) *e2erig.Process) e2erig.MemoryRow {
	t.Helper()
	var readings []e2erig.Memory
	for round := range rounds {
		p := start(round)
		e2erig.Eventually(t, ctx, 10*time.Minute, fmt.Sprintf("%s with %d objects to sync its caches", name, objects), func(context.Context) (bool, error) {
			log, err := os.ReadFile(p.LogPath)
			return err == nil && strings.Contains(string(log), sentinel), err
		})
		waited, err := e2erig.WaitIdle(ctx, p.Pid(), 3*time.Second, 3)
		if err != nil {
			t.Fatal(err)
		}
		m, err := e2erig.ReadMemory(p.Pid())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s with %d objects, start %d: idle after %.0f s, RSS %.1f MiB, peak %.1f MiB", name, objects, round+1, waited.Seconds(), e2erig.MiB(m.RSS), e2erig.MiB(m.Peak))
		readings = append(readings, m)
		p.Signal(syscall.SIGTERM)
		if err := p.Wait(ctx); err != nil {
			t.Logf("%s exit after SIGTERM: %v", name, err)
		}
	}
	return e2erig.MemoryRow{Sidecar: name, Objects: objects, Memory: e2erig.MedianMemory(readings)}
}
