//go:build bench

package attacher

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// TestBenchAttacherMemory measures the resident memory (after the initial sync, and its peak) and the time
// from start to synced caches of Stowage's csi-attacher and of the real upstream one (external-attacher,
// built from its module at the version e2e/tools pins), each at its own default flags, with N
// VolumeAttachments of its driver (and their N PersistentVolumes, on 100 nodes with CSINodes) in its informer
// caches, against a baseline with none, on one control plane. The objects are created already attached, as
// Stowage's attacher leaves them (finalizer, node-id and volume-handle annotations, status.attached), so the
// sidecar has nothing to do after its initial LIST: the reading is the cost of the caches, taken once the
// process is idle. Each figure is the median of STOWAGE_MEMORY_ROUNDS fresh starts; STOWAGE_MEMORY_N lists
// the counts (see rig.MemoryCounts).
func TestBenchAttacherMemory(t *testing.T) {
	counts, rounds := e2erig.MemoryCounts(t), e2erig.MemoryRounds(t)
	const driver, nodes = "memory.csi.stowage.io", 100
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	r := startRig(t)
	upstream := sidecarrig.Upstream(t, sidecarrig.Attacher())
	cfg := r.Cluster.RESTConfig()
	cfg.QPS, cfg.Burst = 2000, 4000
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Without LIST_VOLUMES there is no ListVolumes reconcile, which would otherwise republish every
	// volume this mock driver does not know as published.
	drv, err := csimock.Start(ctx, csimock.Options{Name: driver, ControllerCaps: []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	measure := func(objects int) []e2erig.MemoryRow {
		return []e2erig.MemoryRow{
			measureAttacher(t, ctx, r, drv.Endpoint(), objects, rounds),
			measureUpstreamAttacher(t, ctx, r, upstream, drv.Endpoint(), objects, rounds),
		}
	}

	floor, err := e2erig.FloorClient(r.Cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	finalizer := "external-attacher/" + strings.NewReplacer(".", "-", "/", "-").Replace(driver)
	rows, floors := e2erig.MemoryGrowth{Counts: counts, Measure: measure, Grow: func(from, to int) {
		// The nodes come with the first objects: the empty reading is taken without them.
		if from == 0 {
			for i := range nodes {
				createNode(t, ctx, admin, fmt.Sprintf("node-mem-%d", i), driver, fmt.Sprintf("mock-node-mem-%d", i))
			}
		}
		start := time.Now()
		createAll(t, ctx, to-from, func(ctx context.Context, i int) error {
			return createAttached(ctx, admin, driver, finalizer, from+i, nodes)
		})
		fmt.Printf("created %d PersistentVolumes and attached VolumeAttachments (%d requests) in %.0f s\n", to-from, 3*(to-from), time.Since(start).Seconds())
	}, Lists: []func(context.Context) error{
		e2erig.FloorList(floor.StorageV1().VolumeAttachments().List),
		e2erig.FloorList(floor.CoreV1().PersistentVolumes().List),
		e2erig.FloorList(floor.StorageV1().CSINodes().List),
	}}.Run(t, ctx)
	if calls := drv.Calls(csimock.ControllerPublishVolume); calls != 0 {
		t.Errorf("%d ControllerPublish calls for VolumeAttachments created attached, want none: the sidecar was not idle", calls)
	}

	fmt.Printf("\ncsi-attacher: objects = VolumeAttachments of its driver, each with its PersistentVolume (%d nodes with CSINodes), real kube-apiserver, each at its default flags\n", nodes)
	e2erig.WriteMemoryTable(os.Stdout, rows, func(string) string { return upstreamAttacher })
	e2erig.WriteListFloor(os.Stdout, "a plain protobuf client's LISTs of VolumeAttachments, PersistentVolumes and CSINodes", floors)
	fmt.Printf("%s; synced: from the exec to \"Caches synced\" (Stowage) or the first \"Started VolumeAttachment processing\" (upstream at -v=4, its first line after the sync; with no objects \"Starting CSI attacher\", just before its LIST).\n\n", e2erig.MemoryLegend(rounds))
}

// upstreamAttacher names upstream's rows.
const upstreamAttacher = "csi-attacher v4.13.0"

// createAttached creates PV pv-mem-j of driver and its VolumeAttachment on one of nodes nodes, attached as
// Stowage's attacher leaves it.
func createAttached(ctx context.Context, admin kubernetes.Interface, driver, finalizer string, j, nodes int) error {
	pv, handle := fmt.Sprintf("pv-mem-%06d", j), fmt.Sprintf("vol-mem-%06d", j)
	if _, err := admin.CoreV1().PersistentVolumes().Create(ctx, csiPV(pv, driver, handle), metav1.CreateOptions{}); err != nil {
		return err
	}
	va := directVA(fmt.Sprintf("va-mem-%06d", j), driver, pv, fmt.Sprintf("node-mem-%d", j%nodes))
	va.Finalizers = []string{finalizer}
	va.Annotations = map[string]string{
		"csi.alpha.kubernetes.io/node-id":       fmt.Sprintf("mock-node-mem-%d", j%nodes),
		"attacher.stowage-csi.io/volume-handle": handle,
	}
	created, err := admin.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	// The API server drops status on create. On a loaded machine a write may time out in etcd after it was
	// committed, and the retried status update then conflicts with the version it left: read it again.
	status := storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"devicePath": "/dev/mock/" + handle}}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		created.Status = status
		_, err := admin.StorageV1().VolumeAttachments().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if latest, getErr := admin.StorageV1().VolumeAttachments().Get(ctx, created.Name, metav1.GetOptions{}); getErr == nil {
				created = latest
			}
		}
		return err
	})
}

// measureAttacher measures Stowage's csi-attacher once its caches hold objects (see rig.MeasureSidecar).
func measureAttacher(t *testing.T, ctx context.Context, r *rig, endpoint string, objects, rounds int) e2erig.MemoryRow {
	t.Helper()
	return e2erig.MeasureSidecar(t, ctx, "csi-attacher Stowage", objects, rounds, func(round int) *e2erig.Process {
		return r.startAttacher(t, fmt.Sprintf("memory-%d-%d", objects, round), endpoint)
	})
}

// measureUpstreamAttacher measures upstream's csi-attacher at path as measureAttacher does. It logs nothing
// once its caches synced; at -v=4 it logs "Started VolumeAttachment processing" for each VolumeAttachment its
// workers take, which they do only after the sync, so that line is the signal when there are objects. With
// none, the signal is its start ("Starting CSI attacher", just before the LIST of nothing) and the idle wait.
func measureUpstreamAttacher(t *testing.T, ctx context.Context, r *rig, path, endpoint string, objects, rounds int) e2erig.MemoryRow {
	t.Helper()
	ready := "Started VolumeAttachment processing"
	if objects == 0 {
		ready = "Starting CSI attacher"
	}
	return e2erig.MeasureUpstreamSidecar(t, ctx, upstreamAttacher, ready, objects, rounds, func(round int) *e2erig.Process {
		return r.startBinary(t, path, fmt.Sprintf("upstream-memory-%d-%d", objects, round), endpoint, "-v=4")
	})
}
