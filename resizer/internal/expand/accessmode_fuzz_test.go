package expand

import (
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
)

// FuzzVolumeCapability turns a PV's access modes, which its author lists in any order and may repeat, into
// the capability ControllerExpandVolume gets: no panic; a refusal is InvalidArgument naming spec.accessModes;
// the order and repetition of the modes never change the answer; ReadWriteOncePod is never combined; and a
// mode with many writers is only chosen when the PV allows many.
func FuzzVolumeCapability(f *testing.F) {
	for _, s := range []string{"ReadWriteOnce", "ReadWriteOncePod", "ReadWriteOnce,ReadOnlyMany", "ReadOnlyMany,ReadWriteMany,ReadWriteOnce",
		"ReadWriteOncePod,ReadWriteOnce", "", "Bogus", "ReadWriteOnce,ReadWriteOnce"} {
		f.Add(s, false, false)
		f.Add(s, true, true)
	}
	f.Fuzz(func(t *testing.T, list string, singleNodeMultiWriter, block bool) {
		var modes []v1.PersistentVolumeAccessMode
		for _, m := range strings.Split(list, ",") {
			modes = append(modes, v1.PersistentVolumeAccessMode(m))
		}
		pv := &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{AccessModes: modes,
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{FSType: "ext4"}}}}
		if block {
			mode := v1.PersistentVolumeBlock
			pv.Spec.VolumeMode = &mode
		}
		c, err := volumeCapability(pv, singleNodeMultiWriter)
		reordered := pv.DeepCopy()
		slices.Reverse(reordered.Spec.AccessModes)
		reordered.Spec.AccessModes = append(reordered.Spec.AccessModes, modes...)
		c2, err2 := volumeCapability(reordered, singleNodeMultiWriter)
		if (err == nil) != (err2 == nil) || c.GetAccessMode().GetMode() != c2.GetAccessMode().GetMode() {
			t.Fatalf("modes %q gave %v, %v; reordered and repeated %v, %v", modes, c, err, c2, err2)
		}
		if err != nil {
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "spec.accessModes") {
				t.Fatalf("modes %q: %v: want InvalidArgument naming spec.accessModes", modes, err)
			}
			return
		}
		if slices.Contains(modes, v1.ReadWriteOncePod) && slices.ContainsFunc(modes, func(m v1.PersistentVolumeAccessMode) bool { return m != v1.ReadWriteOncePod }) {
			t.Fatalf("modes %q: ReadWriteOncePod combined, got %v", modes, c)
		}
		if c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER && !slices.Contains(modes, v1.ReadWriteMany) {
			t.Fatalf("modes %q gave many writers", modes)
		}
		if (c.GetBlock() != nil) != block || !block && c.GetMount().GetFsType() != "ext4" {
			t.Fatalf("modes %q, block %v: capability %v", modes, block, c)
		}
	})
}
