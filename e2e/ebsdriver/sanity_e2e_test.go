//go:build e2e

package ebsdriver

import (
	"path/filepath"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
)

// suiteReport receives the counts once csi-sanity's Ginkgo suite ends. Ginkgo only accepts report hooks at
// the top level, so this is package state, written once per run.
var suiteReport types.Report

var _ = ginkgo.ReportAfterSuite("ebs-plugin sanity counts", func(r types.Report) { suiteReport = r })

// TestE2EEBSSanity runs csi-sanity against the real ebs-plugin binary in all mode. EC2 is the emulator at a
// time scale of 0.01, with one instance that is this machine: ControllerPublishVolume makes a loop device
// and the NVMe by-id link, so NodeStage/NodePublish really run mkfs and mount.
//
// Skips (all decided by csi-sanity from the driver's capabilities, none by this test; the test logs each
// skipped spec with csi-sanity's reason):
//   - ListVolumes (incl. pagination), GetCapacity, ControllerGetVolumeHealth, ControllerListVolumeHealth,
//     NodeGetStorageHealth: the driver does not advertise LIST_VOLUMES, GET_CAPACITY, the controller's
//     GET_VOLUME_HEALTH/LIST_VOLUME_HEALTH or the node's GET_STORAGE_HEALTH. EBS has no cheap way to list a
//     cluster's volumes and capacity is not a meaningful per-zone number (upstream implements none of them);
//     volume health is judged on the node, from its mounts and devices. NodeGetVolumeHealth (node
//     GET_VOLUME_HEALTH) is advertised and its two specs run.
//   - ControllerPublishVolume.readonly: PUBLISH_READONLY is not advertised, EBS cannot attach read-only.
//   - SINGLE_NODE_MULTI_WRITER: not advertised; EBS multi-writer is MULTI_NODE_MULTI_WRITER on io2 block only.
//   - GroupControllerService / VolumeGroupSnapshots: EBS has no group snapshots.
//   - SNAPSHOT_ACCESSIBILITY_CONSTRAINTS: EBS snapshots are regional.
func TestE2EEBSSanity(t *testing.T) {
	const instanceID = "i-0e2e5a0171c0ffee0"
	sim, p := startLocalPlugin(t, instanceID, "--k8s-tag-cluster-id=sanity", "--extra-tags=suite=csi-sanity")

	work := t.TempDir()
	cfg := sanity.NewTestConfig()
	cfg.Address = "unix://" + p.socket
	cfg.TargetPath = filepath.Join(work, "target")
	cfg.StagingPath = filepath.Join(work, "staging")
	cfg.IdempotentCount = 2
	cfg.TestVolumeSize = 1 << 30
	cfg.TestVolumeExpandSize = 2 << 30
	cfg.TestNodeVolumeAttachLimit = true
	cfg.IDGen = idGen{}
	cfg.TestVolumeParameters = map[string]string{
		"type":                      "gp3",
		"csi.storage.k8s.io/fstype": "ext4",
		"tagSpecification_1":        "owner={{ .PVCNamespace | toUpper }}",
	}
	// gp3 at 1 GiB: 3000 IOPS is the baseline any size gets (more needs 500 IOPS per GiB), so only the
	// throughput changes; 153 MiB/s is within 0.25 MiB/s per IOPS.
	cfg.TestVolumeMutableParameters = map[string]string{"iops": "3000", "throughput": "153"}
	cfg.TestSnapshotParameters = map[string]string{"tagSpecification_1": "suite=csi-sanity"}
	sanity.Test(t, cfg)

	passed, failed, skipped := 0, 0, 0
	for _, s := range suiteReport.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt {
			continue
		}
		switch {
		case s.State.Is(types.SpecStatePassed):
			passed++
		case s.State.Is(types.SpecStateSkipped | types.SpecStatePending):
			skipped++
			t.Logf("skipped: %s: %s", s.FullText(), s.Failure.Message)
		case s.State.Is(types.SpecStateFailureStates):
			failed++
		}
	}
	t.Logf("csi-sanity: passed=%d failed=%d skipped=%d", passed, failed, skipped)
	if passed == 0 || failed > 0 {
		t.Errorf("csi-sanity: passed=%d failed=%d", passed, failed)
	}
	st := sim.State()
	for _, v := range st.Volumes {
		if v.State != "deleted" {
			t.Errorf("volume %s left in state %s", v.ID, v.State)
		}
	}
	for _, a := range st.Attachments {
		t.Errorf("attachment of %s to %s left in state %s", a.VolumeID, a.InstanceID, a.State)
	}
}
