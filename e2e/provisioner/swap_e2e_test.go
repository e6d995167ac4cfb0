//go:build e2e

package provisioner

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/e2e/tools"
)

// TestE2EProvisionerSwapWithUpstream swaps csi-provisioner with the real upstream one (external-provisioner,
// built from its module at the version e2e/tools pins) between a claim's provisioning and its deletion, both
// ways, under deploy/rbac/csi-provisioner.yaml and one lease: what one provisioned, the other deletes, PV and
// volume, and nothing is left in the driver.
func TestE2EProvisionerSwapWithUpstream(t *testing.T) {
	e := setUpProvisionerTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	upstream, err := tools.Binary(ctx, tools.CSIProvisioner(), "csi-provisioner")
	if err != nil {
		t.Fatal(err)
	}
	ours := provisionerBinary(t)
	t.Run("UpstreamProvisionsStowageDeletes", func(t *testing.T) { testProvisionerSwap(t, e, "up-to-stowage", upstream, ours) })
	t.Run("StowageProvisionsUpstreamDeletes", func(t *testing.T) { testProvisionerSwap(t, e, "stowage-to-up", ours, upstream) })
}

// testProvisionerSwap provisions a claim with the provisioner at first, stops it as a rolling update would
// (SIGTERM), starts the one at second in its place, and deletes the claim through it.
func testProvisionerSwap(t *testing.T, e *provisionerTest, name, first, second string) {
	old := startProvisionerAt(t, first, e.kubeconfig, e.drv.Endpoint(), "--extra-create-metadata")
	pvc := createClaim(t, e.kube, claim(e.ns, name, "immediate", "1Gi"))
	pv := waitBound(t, e.kube, pvc)
	waitNoIntent(t, e.kube, pvc) // Stowage's leak guard is released once the PV is bound: the swap is at rest
	old.Signal(syscall.SIGTERM)
	<-old.Done()

	startProvisionerAt(t, second, e.kubeconfig, e.drv.Endpoint(), "--extra-create-metadata")
	deleteClaimsWaitPVsGone(t, e.kube, e.ns, name)
	if n := countVolumes(e.drv, pv.Name); n != 0 {
		t.Errorf("driver still holds %d volumes named %s after the claim and PV were deleted", n, pv.Name)
	}
}
