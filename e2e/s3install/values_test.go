package s3install

import (
	"reflect"
	"testing"

	"github.com/stowage-csi/stowage/e2e/helm"
)

func TestValuesSetEveryImageToTheAssembledOneNeverPulled(t *testing.T) {
	got := helm.MergeValues(values(), map[string]any{"controller": map[string]any{"image": map[string]any{"tag": "other"}}})
	want := func(name, tag string) map[string]any {
		return map[string]any{"repository": "stowage/" + name, "tag": tag, "pullPolicy": "Never"}
	}
	sidecars := got["sidecars"].(map[string]any)
	for path, pair := range map[string][2]any{
		"image":                        {got["image"], want("s3-node", ImageTag)},
		"controller.image":             {got["controller"].(map[string]any)["image"], want("s3-controller", "other")},
		"mountpointPod.image":          {got["mountpointPod"].(map[string]any)["image"], want("s3-mounter", ImageTag)},
		"sidecars.nodeDriverRegistrar": {sidecars["nodeDriverRegistrar"].(map[string]any)["image"], want("csi-node-driver-registrar", ImageTag)},
		"sidecars.livenessProbe":       {sidecars["livenessProbe"].(map[string]any)["image"], want("livenessprobe", ImageTag)},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s = %v, want %v", path, pair[0], pair[1])
		}
	}
}
