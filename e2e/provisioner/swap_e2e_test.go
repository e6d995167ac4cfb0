//go:build e2e

package provisioner

import (
	"syscall"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

// TestE2EProvisionerSwapWithUpstream swaps csi-provisioner with the real upstream one (external-provisioner,
// built from its module at the version e2e/tools pins) between a claim's provisioning and its deletion, both
// ways, under deploy/rbac/csi-provisioner.yaml and one lease: what one provisioned, the other deletes, PV and
// volume, and nothing is left in the driver.
func TestE2EProvisionerSwapWithUpstream(t *testing.T) {
	e := setUpProvisionerTest(t)
	upstream, ours := peerBinaries(t)
	t.Run("UpstreamProvisionsStowageDeletes", func(t *testing.T) { testProvisionerSwap(t, e, "up-to-stowage", upstream, ours) })
	t.Run("StowageProvisionsUpstreamDeletes", func(t *testing.T) { testProvisionerSwap(t, e, "stowage-to-up", ours, upstream) })
}

// testProvisionerSwap provisions a claim with the provisioner at first, stops it as a rolling update would
// (SIGTERM), starts the one at second in its place, and deletes the claim through it.
func testProvisionerSwap(t *testing.T, e *provisionerTest, name, first, second string) {
	old := startProvisionerAt(t, e.r, first, e.drv.Endpoint(), "--extra-create-metadata")
	pvc := createClaim(t, e.kube, claim(e.ns, name, "immediate", "1Gi"))
	pv := waitBound(t, e.kube, pvc)
	waitNoIntent(t, e.kube, pvc) // Stowage's leak guard is released once the PV is bound: the swap is at rest
	old.Signal(syscall.SIGTERM)
	<-old.Done()

	startProvisionerAt(t, e.r, second, e.drv.Endpoint(), "--extra-create-metadata")
	deleteClaimsWaitPVsGone(t, e.kube, e.ns, name)
	if n := countVolumes(e.drv, pv.Name); n != 0 {
		t.Errorf("driver still holds %d volumes named %s after the claim and PV were deleted", n, pv.Name)
	}
}

// TestE2EProvisionerSwapMidCreate swaps the provisioner while CreateVolume is in flight, both ways: the first is
// killed with the call blocked in the driver, the second takes over, provisions the claim with the volume the
// first asked for, and deletes it. Stowage leaves nothing on the claim (its intent is in its own Lease), so
// upstream finishes a claim Stowage was provisioning as its own.
func TestE2EProvisionerSwapMidCreate(t *testing.T) {
	e := setUpProvisionerTest(t)
	upstream, ours := peerBinaries(t)
	t.Run("UpstreamKilledStowageFinishes", func(t *testing.T) { testSwapMidCreate(t, e, "mid-up", upstream, ours) })
	t.Run("StowageKilledUpstreamFinishes", func(t *testing.T) { testSwapMidCreate(t, e, "mid-stowage", ours, upstream) })
}

func testSwapMidCreate(t *testing.T, e *provisionerTest, name, first, second string) {
	release := make(chan struct{})
	blocked := blockCreate(t, e.drv, name, release)
	old := startProvisionerAt(t, e.r, first, e.drv.Endpoint(), "--extra-create-metadata")
	pvc := createClaim(t, e.kube, claim(e.ns, name, "immediate", "1Gi"))
	var volName string
	select {
	case volName = <-blocked:
	case <-time.After(60 * time.Second):
		t.Fatal("CreateVolume never reached the driver")
	}
	old.kill()
	close(release)
	e.drv.SetBeforeCall(nil)

	startProvisionerAt(t, e.r, second, e.drv.Endpoint(), "--extra-create-metadata")
	pv := waitBound(t, e.kube, pvc)
	if pv.Name != volName {
		t.Errorf("claim bound to %s, want the volume the first provisioner asked for, %s", pv.Name, volName)
	}
	deleteClaimsWaitPVsGone(t, e.kube, e.ns, name)
	waitClaimGone(t, e.kube, pvc, 90*time.Second)
	if n := countVolumes(e.drv, volName); n != 0 {
		t.Errorf("driver still holds %d volumes named %s", n, volName)
	}
}

// peerBinaries returns upstream's csi-provisioner (built once per pinned version into the cache) and ours.
func peerBinaries(t *testing.T) (upstream, ours string) {
	t.Helper()
	return sidecarrig.Upstream(t, sidecarrig.Provisioner()), sidecarrig.Binary(t, sidecarrig.Provisioner())
}
