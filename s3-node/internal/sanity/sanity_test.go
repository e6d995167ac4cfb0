package sanity

import (
	"context"
	"errors"
	"flag"
	"net"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/stowage-csi/stowage/s3-node/internal/attachments"
	"github.com/stowage-csi/stowage/s3-node/internal/driver"
	"github.com/stowage-csi/stowage/s3-node/internal/mounter"
	"github.com/stowage-csi/stowage/s3-node/internal/testutil"
	"github.com/stowage-csi/stowage/shared/s3api"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
)

// suiteReport receives csi-sanity's results; Ginkgo takes report hooks only at the top level.
var suiteReport types.Report

var _ = ginkgo.ReportAfterSuite("s3-node sanity", func(r types.Report) { suiteReport = r })

// noController are the suites of services s3-node does not serve, as upstream: there is no controller
// (buckets exist before their PVs) and no group controller. They are left out with -ginkgo.skip, since
// without the service they fail on Unimplemented instead of skipping.
var noController = []string{
	`[Controller Server]`, `GroupController Service`, `ControllerGetVolumeHealth`, `ControllerListVolumeHealth`,
	// It creates a volume through the controller first.
	`Node Service NodeUnpublishVolume should remove target path`,
}

const (
	noCtrl  = "csi-sanity needs the controller service to create a volume first"
	noStage = "STAGE_UNSTAGE_VOLUME is not advertised (upstream neither)"
	noStats = "GET_VOLUME_STATS is not advertised (upstream neither)"
	noExp   = "EXPAND_VOLUME is not advertised: a bucket has no size"
	noHlth  = "no volume or storage health is advertised (upstream neither)"
	noSNMW  = "SINGLE_NODE_MULTI_WRITER is not advertised"
)

// wantSkips are the specs csi-sanity itself skips, from s3-node's capabilities.
var wantSkips = map[string]string{
	"Node Service should work":                                                                     noCtrl,
	"Node Service should be idempotent":                                                            noCtrl,
	"Node Service NodeStageVolume should fail when no volume id is provided":                       noStage,
	"Node Service NodeStageVolume should fail when no staging target path is provided":             noStage,
	"Node Service NodeStageVolume should fail when no volume capability is provided":               noStage,
	"Node Service NodeUnstageVolume should fail when no volume id is provided":                     noStage,
	"Node Service NodeUnstageVolume should fail when no staging target path is provided":           noStage,
	"Node Service NodeGetVolumeStats should fail when no volume id is provided":                    noStats,
	"Node Service NodeGetVolumeStats should fail when no volume path is provided":                  noStats,
	"Node Service NodeGetVolumeStats should fail when volume is not found":                         noStats,
	"Node Service NodeGetVolumeStats should fail when volume does not exist on the specified path": noStats,
	"Node Service NodeExpandVolume should fail when no volume id is provided":                      noExp,
	"Node Service NodeExpandVolume should fail when no volume path is provided":                    noExp,
	"Node Service NodeExpandVolume should fail when volume is not found":                           noExp,
	"Node Service NodeExpandVolume should work if node-expand is called after node-publish":        noExp,
	"Node Service NodeGetVolumeHealth should fail when no volume id is provided":                   noHlth,
	"Node Service NodeGetVolumeHealth should return health for a valid volume":                     noHlth,
	"Node Service NodeGetStorageHealth should return appropriate response":                         noHlth,
	"Node Service NodePublishVolume with single node multi writer capability should fail when volume with single node single writer access mode is already mounted at a different target path": noSNMW,
}

type noAttachments struct{}

func (noAttachments) Find(context.Context, attachments.Key, string) (*s3api.MountpointS3PodAttachment, string, error) {
	return nil, "", attachments.ErrNotFound
}

func (noAttachments) RunningPod(context.Context, string) (*corev1.Pod, error) {
	return nil, errors.New("no Mountpoint Pods in this test")
}

func TestSanity(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "csi.sock")
	d := driver.New(driver.Options{NodeID: "sanity-node", Endpoint: "unix://" + sock, Version: "sanity", Lookup: noAttachments{},
		Mounter: mounter.New(mounter.Config{Sys: testutil.NewFakeSys(), Paths: mounter.Paths{Kubelet: filepath.Join(dir, "kubelet")}})})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	// Fails here, naming the socket, rather than in every csi-sanity test at once.
	sharedtestutil.Eventually(t, 10*time.Second, "the CSI socket "+sock+" to accept connections", func() (bool, error) {
		return socketUp(sock)
	})

	if err := flag.Set("ginkgo.skip", skipRegexp()); err != nil {
		t.Fatal(err)
	}
	cfg := sanity.NewTestConfig()
	cfg.Address = "unix://" + sock
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
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
			if !excluded(r.FullText()) {
				skipped = append(skipped, r.FullText())
			}
		case r.State.Is(types.SpecStateFailureStates):
			failed++
		}
	}
	t.Logf("csi-sanity: passed=%d failed=%d skipped=%d (plus the controller suites left out)", passed, failed, len(skipped))
	if passed == 0 || failed > 0 {
		t.Errorf("csi-sanity: passed=%d failed=%d", passed, failed)
	}
	sort.Strings(skipped)
	got := map[string]bool{}
	for _, s := range skipped {
		got[s] = true
		if _, ok := wantSkips[s]; !ok {
			t.Errorf("unexpected skip: %q", s)
		}
	}
	for s := range wantSkips {
		if !got[s] {
			t.Errorf("pinned skip did not skip: %q", s)
		}
	}
}

func excluded(name string) bool {
	for _, p := range noController {
		if strings.Contains(name, p) {
			return true
		}
	}
	return false
}

func skipRegexp() string {
	quoted := make([]string, len(noController))
	for i, p := range noController {
		quoted[i] = regexp.QuoteMeta(p)
	}
	return strings.Join(quoted, "|")
}

// socketUp reports whether path accepts connections, or why not.
func socketUp(path string) (bool, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return false, err
	}
	_ = c.Close()
	return true, nil
}
