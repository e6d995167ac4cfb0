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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// TestBenchAttacherMemory measures the resident memory of Stowage's csi-attacher and of the real upstream one
// (external-attacher, built from its module at the version e2e/tools pins), each at its own default flags,
// with 10,000 VolumeAttachments of its driver (and their 10,000 PersistentVolumes, on 100 nodes with
// CSINodes) in its informer caches, against a baseline with none, on one control plane. The objects are created already attached, as Stowage's attacher leaves them
// (finalizer, node-id and volume-handle annotations, status.attached), so the sidecar has nothing to do
// after its initial LIST: the reading is the cost of the caches, taken once the process is idle. Each
// figure is the median of memoryRounds fresh starts.
// ATTACHER_MEMORY_N overrides the number of VolumeAttachments.
func TestBenchAttacherMemory(t *testing.T) {
	n := e2erig.EnvCount(t, "ATTACHER_MEMORY_N", 10000)
	const driver, nodes = "memory.csi.stowage.io", 100
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
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

	var rows []e2erig.MemoryRow
	rows = append(rows, measureAttacher(t, ctx, r, drv.Endpoint(), 0), measureUpstreamAttacher(t, ctx, r, upstream, drv.Endpoint(), 0))

	start := time.Now()
	for i := range nodes {
		createNode(t, ctx, admin, fmt.Sprintf("node-mem-%d", i), driver, fmt.Sprintf("mock-node-mem-%d", i))
	}
	finalizer := "external-attacher/" + strings.NewReplacer(".", "-", "/", "-").Replace(driver)
	createAll(t, ctx, n, func(ctx context.Context, j int) error {
		pv, handle := fmt.Sprintf("pv-mem-%05d", j), fmt.Sprintf("vol-mem-%05d", j)
		if _, err := admin.CoreV1().PersistentVolumes().Create(ctx, csiPV(pv, driver, handle), metav1.CreateOptions{}); err != nil {
			return err
		}
		va := directVA(fmt.Sprintf("va-mem-%05d", j), driver, pv, fmt.Sprintf("node-mem-%d", j%nodes))
		va.Finalizers = []string{finalizer}
		va.Annotations = map[string]string{
			"csi.alpha.kubernetes.io/node-id":       fmt.Sprintf("mock-node-mem-%d", j%nodes),
			"attacher.stowage-csi.io/volume-handle": handle,
		}
		created, err := admin.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		// The API server drops status on create.
		created.Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"devicePath": "/dev/mock/" + handle}}
		_, err = admin.StorageV1().VolumeAttachments().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
	fmt.Printf("\ncreated %d PersistentVolumes and %d attached VolumeAttachments (%d requests) in %.0f s\n", n, n, 3*n, time.Since(start).Seconds())

	rows = append(rows, measureAttacher(t, ctx, r, drv.Endpoint(), n), measureUpstreamAttacher(t, ctx, r, upstream, drv.Endpoint(), n))
	if calls := drv.Calls(csimock.ControllerPublishVolume); calls != 0 {
		t.Errorf("%d ControllerPublish calls for VolumeAttachments created attached, want none: the sidecar was not idle", calls)
	}

	fmt.Printf("\ncsi-attacher memory: objects = VolumeAttachments of its driver, each with its PersistentVolume (%d nodes with CSINodes), real kube-apiserver, each at its default flags\n", nodes)
	e2erig.WriteMemoryTable(os.Stdout, rows)
	fmt.Printf("RSS: VmRSS once idle after the initial LIST; peak: VmHWM (the initial LIST and decode); medians of %d fresh starts; per 1,000: RSS growth over the empty row.\n", memoryRounds)
	fmt.Printf("RSS at %d objects, Stowage / upstream: %.2fx (peak %.2fx)\n", n, float64(rows[2].RSS)/float64(rows[3].RSS), float64(rows[2].Peak)/float64(rows[3].Peak))
	fmt.Println()
}

// memoryRounds is how many fresh starts each memory figure is the median of.
const memoryRounds = 3

// measureAttacher measures Stowage's csi-attacher's memory once its caches hold objects (see rig.MeasureSidecar).
func measureAttacher(t *testing.T, ctx context.Context, r *rig, endpoint string, objects int) e2erig.MemoryRow {
	t.Helper()
	return e2erig.MeasureSidecar(t, ctx, "Stowage", objects, memoryRounds, func(round int) *e2erig.Process {
		return r.startAttacher(t, fmt.Sprintf("memory-%d-%d", objects, round), endpoint)
	})
}

// measureUpstreamAttacher measures upstream's csi-attacher at path as measureAttacher does. It logs nothing
// once its caches synced; at -v=4 it logs "Started VolumeAttachment processing" for each VolumeAttachment its
// workers take, which they do only after the sync, so that line is the signal when there are objects. With
// none, the signal is its start ("Starting CSI attacher", just before the LIST of nothing) and the idle wait.
func measureUpstreamAttacher(t *testing.T, ctx context.Context, r *rig, path, endpoint string, objects int) e2erig.MemoryRow {
	t.Helper()
	ready := "Started VolumeAttachment processing"
	if objects == 0 {
		ready = "Starting CSI attacher"
	}
	return e2erig.MeasureUpstreamSidecar(t, ctx, "upstream v4.13.0", ready, objects, memoryRounds, func(round int) *e2erig.Process {
		return r.startBinary(t, path, fmt.Sprintf("upstream-memory-%d-%d", objects, round), endpoint, "-v=4")
	})
}
