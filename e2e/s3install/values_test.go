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

func TestProvisionerValuesEnableTheSidecarPointedAtTheServer(t *testing.T) {
	got := helm.MergeValues(values(), provisionerValues("http://10.0.0.1:7070"))
	prov := got["sidecars"].(map[string]any)["provisioner"].(map[string]any)
	if prov["enabled"] != true {
		t.Errorf("sidecars.provisioner.enabled = %v, want true", prov["enabled"])
	}
	if want := map[string]any{"repository": "stowage/csi-provisioner", "tag": ImageTag, "pullPolicy": "Never"}; !reflect.DeepEqual(prov["image"], want) {
		t.Errorf("sidecars.provisioner.image = %v, want %v", prov["image"], want)
	}
	// The node plugin's sidecars stay as values() sets them.
	if _, ok := got["sidecars"].(map[string]any)["livenessProbe"]; !ok {
		t.Error("sidecars.livenessProbe lost in the merge")
	}
	ctrl := got["controller"].(map[string]any)
	env := ctrl["env"].([]any)
	if len(env) != 2 || !reflect.DeepEqual(env[0], map[string]any{"name": "AWS_ENDPOINT_URL", "value": "http://10.0.0.1:7070"}) {
		t.Errorf("controller.env = %v, want AWS_ENDPOINT_URL first", env)
	}
	if !reflect.DeepEqual(ctrl["additionalArgs"], []any{"--s3-force-path-style"}) {
		t.Errorf("controller.additionalArgs = %v", ctrl["additionalArgs"])
	}
	if ctrl["image"] == nil {
		t.Error("controller.image lost in the merge")
	}
}
