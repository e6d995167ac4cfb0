package deploycheck

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// seLinuxFields are what node.selinux and the selinux component set: the CSIDriver's seLinuxMount, and the
// node plugin's two SELinux volumes and its mounts of them.
var seLinuxFields = []struct{ target, path string }{
	{"CSIDriver/ebs.csi.aws.com", "spec.seLinuxMount"},
	{ebsNode, podSpec + ".volumes[name=selinux-sysfs]"},
	{ebsNode, podSpec + ".volumes[name=selinux-config]"},
	{ebsNode, container("ebs-plugin") + ".volumeMounts[name=selinux-sysfs]"},
	{ebsNode, container("ebs-plugin") + ".volumeMounts[name=selinux-config]"},
}

// TestKustomizeSELinuxMatchesChart: the selinux component composes what the chart renders with node.selinux,
// field for field, and the base without it renders none of those fields.
func TestKustomizeSELinuxMatchesChart(t *testing.T) {
	chart := seLinuxShape(renderChart(t, "stowage-ebs", set("node.selinux", true)))
	kustomize := seLinuxShape(renderKustomization(t, Kustomization{Resources: []string{kustomizeDir("ebs")},
		Components: []string{kustomizeDir("components/selinux")}}))
	plain := seLinuxShape(renderKustomization(t, Kustomization{Resources: []string{kustomizeDir("ebs")}}))
	for i, f := range seLinuxFields {
		if chart[i] == nil {
			t.Errorf("the chart with node.selinux renders no %s %s", f.target, f.path)
		}
		if !reflect.DeepEqual(chart[i], kustomize[i]) {
			t.Errorf("%s %s:\n chart     %v\n kustomize %v", f.target, f.path, chart[i], kustomize[i])
		}
		if plain[i] != nil {
			t.Errorf("the base without the component renders %s %s: %v", f.target, f.path, plain[i])
		}
	}
	if chart[0] != true {
		t.Errorf("the chart with node.selinux renders seLinuxMount %v, want true", chart[0])
	}
}

// seLinuxShape is the value of each of seLinuxFields in objs, nil where it is not rendered.
func seLinuxShape(objs []*unstructured.Unstructured) []any {
	r := rendered{objs}
	out := make([]any, len(seLinuxFields))
	for i, f := range seLinuxFields {
		out[i], _ = r.get(f.target, f.path) // an error is a field not rendered: nil
	}
	return out
}
