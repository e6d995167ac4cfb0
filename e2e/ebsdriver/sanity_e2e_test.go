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

const (
	noListVolumes   = "LIST_VOLUMES is not advertised: EBS has no cheap way to list a cluster's volumes (upstream does not either)"
	noGroupSnapshot = "the group controller service is not served: EBS has no group snapshots"
	noCtrlHealth    = "the controller's GET_VOLUME_HEALTH/LIST_VOLUME_HEALTH are not advertised: volume health is judged on the node, from its mounts and devices"
)

// sanitySkips are the csi-sanity specs that skip against ebs-plugin, each decided by csi-sanity from the
// driver's capabilities (none by this test), with the reason. The test fails on a skip not listed here and
// on a listed spec that did not skip, so the list stays what csi-sanity really leaves out. NodeGetVolumeHealth
// (the node's GET_VOLUME_HEALTH) is advertised and its specs run.
var sanitySkips = []pinnedSkip{
	{"Controller Service [Controller Server] ListVolumes should return appropriate values (no optional values added)", noListVolumes},
	{"Controller Service [Controller Server] ListVolumes should fail when an invalid starting_token is passed", noListVolumes},
	{"Controller Service [Controller Server] ListVolumes check the presence of new volumes and absence of deleted ones in the volume list", noListVolumes},
	{"Controller Service [Controller Server] ListVolumes pagination should detect volumes added between pages and accept tokens when the last volume from a page is deleted", noListVolumes},
	{"Controller Service [Controller Server] GetCapacity should return capacity (no optional values added)",
		"GET_CAPACITY is not advertised: capacity is not a meaningful per-zone number for EBS (upstream does not either)"},
	{"Controller Service [Controller Server] ControllerPublishVolume should fail when the volume is already published but is incompatible",
		"the incompatible second publish differs in readonly, and PUBLISH_READONLY is not advertised: EBS cannot attach read-only"},
	{"ControllerGetVolumeHealth [Controller Server] should fail when no volume id is provided", noCtrlHealth},
	{"ControllerGetVolumeHealth [Controller Server] should return health for a valid volume", noCtrlHealth},
	{"ControllerListVolumeHealth [Controller Server] should return appropriate response", noCtrlHealth},
	{"Node Service NodeGetStorageHealth should return appropriate response",
		"the node's GET_STORAGE_HEALTH is not advertised: the node reports volume health, not storage health"},
	{"Node Service NodePublishVolume with single node multi writer capability should fail when volume with single node single writer access mode is already mounted at a different target path",
		"SINGLE_NODE_MULTI_WRITER is not advertised: EBS multi-writer is MULTI_NODE_MULTI_WRITER on io2 block volumes only"},
	{"CreateSnapshot [Controller Server] should succeed when creating a snapshot with accessibility requirements",
		"SNAPSHOT_ACCESSIBILITY_CONSTRAINTS is not advertised: EBS snapshots are regional"},
	{"GroupController Service [GroupController Server] GroupControllerGetCapabilities should return appropriate capabilities", noGroupSnapshot},
	{"GroupController Service [GroupController VolumeGroupSnapshots] CreateVolumeGroupSnapshot should fail when no name is provided", noGroupSnapshot},
	{"GroupController Service [GroupController VolumeGroupSnapshots] GetVolumeGroupSnapshot should fail when no volume id is provided", noGroupSnapshot},
	{"GroupController Service [GroupController VolumeGroupSnapshots] GetVolumeGroupSnapshot should fail when an invalid volume id is used", noGroupSnapshot},
	{"GroupController Service [GroupController VolumeGroupSnapshots] DeleteVolumeGroupSnapshot should fail when no volume id is provided", noGroupSnapshot},
	{"GroupController Service [GroupController VolumeGroupSnapshots] DeleteVolumeGroupSnapshot should succeed when an invalid volume id is used", noGroupSnapshot},
}

// TestE2EEBSSanity runs csi-sanity against the real ebs-plugin binary in all mode. EC2 is the emulator at a
// time scale of 0.01, with one instance that is this machine: ControllerPublishVolume makes a loop device
// and the NVMe by-id link, so NodeStage/NodePublish really run mkfs and mount. Every spec must pass except
// the pinned skips (sanitySkips), which must skip.
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

	passed, failed := 0, 0
	var skipped []string
	for _, r := range suiteReport.SpecReports {
		if r.LeafNodeType != types.NodeTypeIt {
			continue
		}
		switch {
		case r.State.Is(types.SpecStatePassed):
			passed++
		case r.State.Is(types.SpecStateSkipped | types.SpecStatePending):
			skipped = append(skipped, r.FullText())
			t.Logf("skipped: %s: %s", r.FullText(), r.Failure.Message)
		case r.State.Is(types.SpecStateFailureStates):
			failed++
		}
	}
	t.Logf("csi-sanity: passed=%d failed=%d skipped=%d", passed, failed, len(skipped))
	if passed == 0 || failed > 0 {
		t.Errorf("csi-sanity: passed=%d failed=%d", passed, failed)
	}
	for _, m := range skipMismatches(sanitySkips, skipped) {
		t.Error(m)
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
