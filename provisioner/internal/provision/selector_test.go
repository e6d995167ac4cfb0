package provision

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
)

// A claim with spec.selector is refused as upstream refuses it: a Warning Event, no write, no CreateVolume, and
// the slow retry. An empty selector is still a selector there (it is checked for nil).
func TestClaimSelectorIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		selector *metav1.LabelSelector
		refused  bool
	}{
		{name: "no selector: provisioned", selector: nil, refused: false},
		{name: "label selector: refused", selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}, refused: true},
		{name: "empty selector: refused", selector: &metav1.LabelSelector{}, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := testutil.Claim("ns", "data", uid, "fast", "1Gi", func(c *v1.PersistentVolumeClaim) { c.Spec.Selector = tc.selector })
			h := newHarness(t, defaultConfig(), claim, testutil.Class("fast", nil))
			err := h.p.SyncClaim(context.Background(), claim.DeepCopy())
			if !tc.refused {
				if err != nil || len(h.csi.Creates) != 1 {
					t.Fatalf("err %v, CreateVolume calls %d", err, len(h.csi.Creates))
				}
				return
			}
			if !errors.Is(err, errSelectorNotSupported) || !IsSlow(err) {
				t.Errorf("err %v (slow %v), want the slow %q", err, IsSlow(err), errSelectorNotSupported)
			}
			if len(h.csi.Creates) != 0 || len(h.actions()) != 0 {
				t.Errorf("refused claim: CreateVolume calls %d, API actions %q", len(h.csi.Creates), h.actions())
			}
			if ev := h.events(); !hasEvent(ev, "Warning", ReasonProvisioningFailed, "claim Selector is not supported") {
				t.Errorf("events %q, want a ProvisioningFailed Warning naming the selector", ev)
			}
		})
	}
}
