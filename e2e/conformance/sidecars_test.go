package conformance

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stowage-csi/stowage/e2e/images"
)

func upstreamImage(name, tag string) images.UpstreamImage {
	return images.UpstreamImage{
		Archive: images.Archive{Path: "/cache/" + name + ".tar"}, Name: name,
		Repository: images.UpstreamRepository + "/" + name, Tag: tag,
	}
}

// TestNewUpstreamSwapPutsEachImageInItsSlot checks the chart values and the snapshot-controller image of the
// upstream-sidecar run, and that a missing upstream image is an error rather than a slot left on Stowage's.
func TestNewUpstreamSwapPutsEachImageInItsSlot(t *testing.T) {
	all := []images.UpstreamImage{
		upstreamImage("csi-attacher", "v4.13.0"), upstreamImage("csi-provisioner", "v6.4.0"),
		upstreamImage("csi-snapshotter", "v8.7.0"), upstreamImage("snapshot-controller", "v8.7.0"),
	}
	sw, err := NewUpstreamSwap(all)
	if err != nil {
		t.Fatal(err)
	}
	sidecars := sw.Values["sidecars"].(map[string]any)
	want := map[string]any{"image": map[string]any{
		"upstream": true, "upstreamRepository": "registry.k8s.io/sig-storage/csi-provisioner", "upstreamTag": "v6.4.0",
		"pullPolicy": "Never",
	}}
	if !reflect.DeepEqual(sidecars["provisioner"], want) {
		t.Errorf("provisioner slot %v, want %v", sidecars["provisioner"], want)
	}
	if len(sidecars) != 3 || sidecars["attacher"] == nil || sidecars["snapshotter"] == nil {
		t.Errorf("slots %v, want attacher, provisioner and snapshotter", sidecars)
	}
	if sw.SnapshotController != "registry.k8s.io/sig-storage/snapshot-controller:v8.7.0" {
		t.Errorf("snapshot-controller image %q", sw.SnapshotController)
	}
	if len(sw.Archives) != 4 {
		t.Errorf("archives %q, want all four", sw.Archives)
	}

	if _, err := NewUpstreamSwap(all[1:]); err == nil || !strings.Contains(err.Error(), "csi-attacher") {
		t.Errorf("without csi-attacher: %v, want an error naming it", err)
	}
	if _, err := NewUpstreamSwap(all[:3]); err == nil || !strings.Contains(err.Error(), "snapshot-controller") {
		t.Errorf("without snapshot-controller: %v, want an error naming it", err)
	}
	if _, err := NewUpstreamSwap(append(all, upstreamImage("csi-resizer", "v2.0.0"))); err == nil {
		t.Error("an image without a slot was accepted")
	}
}
