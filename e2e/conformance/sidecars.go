package conformance

import (
	"fmt"

	"github.com/stowage-csi/stowage/e2e/images"
)

// SidecarsEnv selects whose sidecars a run installs: unset, Stowage's (the chart's defaults); "upstream",
// upstream's in every slot where the rig builds upstream's binary, so the same suite judges Stowage's EBS
// plugin with upstream's sidecars around it.
const SidecarsEnv = "STOWAGE_CONFORMANCE_SIDECARS"

// upstreamSlots maps each upstream sidecar image to the stowage-ebs chart's slot for it. external-resizer has
// no image here (its module does not build from the module proxy), so the resizer slot keeps Stowage's.
var upstreamSlots = map[string]string{
	"csi-attacher":    "attacher",
	"csi-provisioner": "provisioner",
	"csi-snapshotter": "snapshotter",
}

// UpstreamSwap is how a run puts upstream's sidecars in place of Stowage's.
type UpstreamSwap struct {
	Values map[string]any // chart values: each slot on upstream's image
	// SnapshotController is upstream's snapshot-controller image, for the Deployment the rig installs
	// beside the chart.
	SnapshotController string
	Archives           []string // the images' archives, for the nodes to import
}

// NewUpstreamSwap places each of up in its slot. It needs every image upstreamSlots names and
// snapshot-controller: a swap that left one of them on Stowage's would pass for upstream's without being it.
func NewUpstreamSwap(up []images.UpstreamImage) (UpstreamSwap, error) {
	sw := UpstreamSwap{}
	sidecars := map[string]any{}
	for _, u := range up {
		sw.Archives = append(sw.Archives, u.Path)
		if u.Name == "snapshot-controller" {
			sw.SnapshotController = u.Repository + ":" + u.Tag
			continue
		}
		slot, ok := upstreamSlots[u.Name]
		if !ok {
			return UpstreamSwap{}, fmt.Errorf("the chart has no slot for upstream's %s", u.Name)
		}
		sidecars[slot] = map[string]any{"image": map[string]any{
			"upstream": true, "upstreamRepository": u.Repository, "upstreamTag": u.Tag, "pullPolicy": "Never",
		}}
	}
	for name, slot := range upstreamSlots {
		if sidecars[slot] == nil {
			return UpstreamSwap{}, fmt.Errorf("no upstream %s image for the chart's %s slot", name, slot)
		}
	}
	if sw.SnapshotController == "" {
		return UpstreamSwap{}, fmt.Errorf("no upstream snapshot-controller image")
	}
	sw.Values = map[string]any{"sidecars": sidecars}
	return sw, nil
}
