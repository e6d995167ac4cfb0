package deploycheck

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestKustomizeSELinuxMatchesChart: the selinux component composes what the chart renders with node.selinux:
// the CSIDriver's seLinuxMount, and the node plugin's SELinux volumes and mounts, field for field.
func TestKustomizeSELinuxMatchesChart(t *testing.T) {
	kobjs := renderKustomization(t, Kustomization{Resources: []string{kustomizeDir("ebs")},
		Components: []string{kustomizeDir("components/selinux")}})
	hobjs := renderChart(t, "stowage-ebs", set("node.selinux", true))
	want, got := seLinuxShape(t, hobjs), seLinuxShape(t, kobjs)
	if !strings.Contains(want, `"seLinuxMount":true`) || !strings.Contains(want, "/sys/fs/selinux") {
		t.Fatalf("the chart with node.selinux renders no SELinux mounts: %s", want)
	}
	if got != want {
		t.Errorf("SELinux settings differ:\n chart     %s\n kustomize %s", want, got)
	}
	if plain := seLinuxShape(t, renderKustomization(t, Kustomization{Resources: []string{kustomizeDir("ebs")}})); strings.Contains(plain, "selinux") || strings.Contains(plain, `"seLinuxMount":true`) {
		t.Errorf("the base without the component has SELinux settings: %s", plain)
	}
}

// seLinuxShape is the CSIDriver's seLinuxMount and the ebs-csi-node Pod's selinux-* volumes and the ebs-plugin
// container's mounts of them, as JSON.
func seLinuxShape(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	shape := map[string]any{}
	if d := find(objs, "CSIDriver", "", "ebs.csi.aws.com"); d != nil {
		v, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "seLinuxMount")
		shape["seLinuxMount"] = v
	}
	ds := find(objs, "DaemonSet", "kube-system", "ebs-csi-node")
	if ds == nil {
		t.Fatal("no DaemonSet ebs-csi-node")
	}
	vols, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "volumes")
	shape["volumes"] = named(vols, "selinux-")
	containers, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		if c, _ := c.(map[string]any); c["name"] == "ebs-plugin" {
			mounts, _, _ := unstructured.NestedSlice(c, "volumeMounts")
			shape["mounts"] = named(mounts, "selinux-")
		}
	}
	b, err := json.Marshal(shape)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// named keeps the items whose name starts with prefix.
func named(items []any, prefix string) []any {
	var out []any
	for _, it := range items {
		if m, _ := it.(map[string]any); strings.HasPrefix(nameOf(m), prefix) {
			out = append(out, it)
		}
	}
	return out
}

func nameOf(m map[string]any) string {
	s, _ := m["name"].(string)
	return s
}
