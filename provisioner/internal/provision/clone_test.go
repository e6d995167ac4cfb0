package provision

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
)

// The clone's request is checked against the source claim's request, as upstream does, not against the source
// PV's capacity: a smaller request is refused with an Event and no CreateVolume; a source PV the driver rounded
// up does not block a clone of the source's requested size.
func TestCloneSizeIsCheckedAgainstTheSourceClaim(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		srcRequest, srcPV, req string
		refused                bool
	}{
		{name: "smaller than the source claim", srcRequest: "2Gi", srcPV: "2Gi", req: "1Gi", refused: true},
		{name: "smaller than the source claim, whose PV is smaller still", srcRequest: "2Gi", srcPV: "1Gi", req: "1Gi", refused: true},
		{name: "as large as the source claim", srcRequest: "2Gi", srcPV: "2Gi", req: "2Gi"},
		{name: "larger than the source claim", srcRequest: "1Gi", srcPV: "1Gi", req: "2Gi"},
		{name: "as large as the source claim, smaller than its rounded-up PV", srcRequest: "1Gi", srcPV: "2Gi", req: "1Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, srcPV := boundSource(tc.srcRequest)
			srcPV.Spec.Capacity[v1.ResourceStorage] = resource.MustParse(tc.srcPV)
			clone := testutil.Claim("ns", "data", uid, "fast", tc.req, func(c *v1.PersistentVolumeClaim) {
				c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
			})
			h := newHarness(t, defaultConfig(), testutil.Class("fast", nil), src, srcPV, clone)
			err := h.p.SyncClaim(context.Background(), clone.DeepCopy())
			if !tc.refused {
				if err != nil || len(h.csi.Creates) != 1 {
					t.Fatalf("err %v, CreateVolume calls %d; want the clone made", err, len(h.csi.Creates))
				}
				return
			}
			if !IsSlow(err) || len(h.csi.Creates) != 0 || len(h.actions()) != 0 {
				t.Errorf("err %v (slow %v), CreateVolume calls %d, actions %q; want a slow error and nothing done", err, IsSlow(err), len(h.csi.Creates), h.actions())
			}
			if ev := h.events(); !hasEvent(ev, "Warning", ReasonProvisioningFailed, "must be greater than or equal in size to the specified PVC data source") {
				t.Errorf("events %q, want a ProvisioningFailed Warning about the size", ev)
			}
		})
	}
}
