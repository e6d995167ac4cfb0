//go:build bench

package snapshotcontroller

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// TestBenchSnapshotterMemory measures the resident memory (after the initial sync, and its peak) and the time
// from start to synced caches of snapshot-controller and csi-snapshotter, Stowage's and upstream's
// (external-snapshotter v8.7.0), with N VolumeSnapshots and their N VolumeSnapshotContents in their informer
// caches, against a baseline with none. The objects are created as both pairs leave a dynamic snapshot that is
// done (finalizers, bound both ways, ready, with handles and sizes), of 100 bound claims, so neither binary
// has anything to do after its initial LIST: the reading is the cost of the caches, taken once the process is
// idle (the audit log and the driver's CreateSnapshot count check that nothing was written). Each figure is
// the median of STOWAGE_MEMORY_ROUNDS fresh starts, with leader election off and the group snapshot CRDs
// installed; STOWAGE_MEMORY_N lists the
// counts (see rig.MemoryCounts).
func TestBenchSnapshotterMemory(t *testing.T) {
	counts, rounds := e2erig.MemoryCounts(t), e2erig.MemoryRounds(t)
	const claims = 100
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	// With the group snapshot CRDs, as upstream's deployment installs them: without, upstream's
	// snapshot-controller probes for them for 30 s before it starts.
	r := startRig(t, true)
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

	measureAll := func(objects int) []e2erig.MemoryRow {
		return []e2erig.MemoryRow{
			e2erig.MeasureSidecar(t, ctx, "snapshot-controller Stowage", objects, rounds, func(round int) *e2erig.Process {
				return r.startController(t, fmt.Sprintf("memory-sc-stowage-%d-%d", objects, round), stowage.controller, "--leader-election=false")
			}),
			e2erig.MeasureUpstreamSidecar(t, ctx, "snapshot-controller "+upstreamVersion, upstreamReady, objects, rounds, func(round int) *e2erig.Process {
				return r.startController(t, fmt.Sprintf("memory-sc-upstream-%d-%d", objects, round), upstream.controller, "--leader-election=false")
			}),
			e2erig.MeasureSidecar(t, ctx, "csi-snapshotter Stowage", objects, rounds, func(round int) *e2erig.Process {
				return r.startSnapshotter(t, fmt.Sprintf("memory-ss-stowage-%d-%d", objects, round), stowage.snapshotter, drv.Endpoint(),
					"--leader-election=false", "--v=4")
			}),
			e2erig.MeasureUpstreamSidecar(t, ctx, "csi-snapshotter "+upstreamVersion, upstreamReady, objects, rounds, func(round int) *e2erig.Process {
				return r.startSnapshotter(t, fmt.Sprintf("memory-ss-upstream-%d-%d", objects, round), upstream.snapshotter, drv.Endpoint(),
					"--leader-election=false", "--v=4")
			}),
		}
	}
	// After the empty reading, nothing written by the binaries while they are measured: they have nothing to do.
	measureIdle := func(objects int) []e2erig.MemoryRow {
		if objects == 0 {
			return measureAll(0)
		}
		before := len(r.Audit.MustWrites(t))
		rows := measureAll(objects)
		for _, w := range r.Audit.MustWrites(t)[before:] {
			if w.User == controllerUser || w.User == snapshotterUser {
				t.Errorf("write while measuring, the binaries were not idle: %s", w)
			}
		}
		return rows
	}

	var creates int
	rows, floors := e2erig.MemoryGrowth{Counts: counts, Measure: measureIdle, Grow: func(from, to int) {
		if from == 0 {
			creates = drv.Calls("/csi.v1.Controller/CreateSnapshot")
		}
		start := time.Now()
		if err := e2erig.Parallel(to-from, 32, func(i int) error {
			j := from + i
			return createDoneSnapshot(ctx, snaps, class, names[j%claims], handles[j%claims], j)
		}); err != nil {
			t.Fatalf("creating snapshots: %v", err)
		}
		fmt.Printf("created %d ready VolumeSnapshots and their bound contents (%d requests) in %.0f s\n", to-from, 4*(to-from), time.Since(start).Seconds())
	}, Lists: []func(context.Context) error{
		e2erig.FloorList(snaps.SnapshotV1().VolumeSnapshots("").List),
		e2erig.FloorList(snaps.SnapshotV1().VolumeSnapshotContents().List),
	}}.Run(t, ctx)
	if calls := drv.Calls("/csi.v1.Controller/CreateSnapshot") - creates; calls != 0 {
		t.Errorf("%d CreateSnapshot calls for snapshots created ready, want none: csi-snapshotter was not idle", calls)
	}

	fmt.Printf("\nsnapshot-controller and csi-snapshotter: objects = ready VolumeSnapshots, each with its bound content, of %d claims; real kube-apiserver, defaults but --leader-election=false (csi-snapshotter --v=4)\n", claims)
	e2erig.WriteMemoryTable(os.Stdout, rows, func(sidecar string) string {
		return strings.Replace(sidecar, "Stowage", upstreamVersion, 1)
	})
	e2erig.WriteListFloor(os.Stdout, "a plain JSON client's LISTs of VolumeSnapshots and VolumeSnapshotContents, custom resources have no protobuf", floors)
	fmt.Printf("%s (the empty rows already cache the %d claims); synced: from the exec to \"Caches synced\" (Stowage) or \"%s\" (upstream at -v=4, logged once its informers synced and it copied their objects into its own caches).\n\n",
		e2erig.MemoryLegend(rounds), claims, upstreamReady)
}

const (
	// upstreamVersion names upstream's rows.
	upstreamVersion = "v8.7.0"
	// upstreamReady is what both of upstream's binaries log at -v=4 once their caches are synced.
	upstreamReady = "controller initialized"
)

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
