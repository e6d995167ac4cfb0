package deploycheck

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// chartCase is one set of values a chart is rendered with.
type chartCase struct {
	name   string
	values map[string]any
}

func chartDir(name string) string { return filepath.Join(repoRoot, "deploy/helm", name) }

// set builds nested values from dotted keys: set("a.b", 1) is {a: {b: 1}}.
func set(kv ...any) map[string]any {
	out := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		keys := strings.Split(kv[i].(string), ".")
		m := out
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[keys[len(keys)-1]] = kv[i+1]
	}
	return out
}

func renderChart(t *testing.T, chart string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := RenderChart(chartDir(chart), "stowage", "kube-system", values)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestHelmLint runs helm lint's checks (chart metadata, templates render, YAML, values) on each chart.
func TestHelmLint(t *testing.T) {
	for _, chart := range []string{"stowage-ebs", "stowage-s3"} {
		t.Run(chart, func(t *testing.T) {
			res := lint.AllWithKubeVersion(chartDir(chart), nil, "kube-system", nil)
			for _, m := range res.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				}
			}
		})
	}
}

// ebsContainers maps the values key of each container slot of stowage-ebs to its image's values path.
var ebsSlots = map[string]string{
	"ebs-plugin":      "image",
	"csi-provisioner": "sidecars.provisioner.image",
	"csi-attacher":    "sidecars.attacher.image",
	"csi-resizer":     "sidecars.resizer.image",
	"csi-snapshotter": "sidecars.snapshotter.image",
	// The controller and the node pods' livenessprobe share one slot.
	"liveness-probe":        "sidecars.livenessProbe.image",
	"node-driver-registrar": "sidecars.nodeDriverRegistrar.image",
}

// ebsControllerSidecars are the values keys of stowage-ebs's controller sidecars.
var ebsControllerSidecars = []string{"provisioner", "attacher", "resizer", "snapshotter"}

// withUpstreamRates is set(kv...) with each controller sidecar's kubeAPIQPS and kubeAPIBurst at upstream's
// manifests' 20 and 100: the kustomize components pass those, the chart only when its values ask.
func withUpstreamRates(kv ...any) map[string]any {
	for _, key := range ebsControllerSidecars {
		kv = append(kv, "sidecars."+key+".kubeAPIQPS", 20, "sidecars."+key+".kubeAPIBurst", 100)
	}
	return set(kv...)
}

// TestHelmEBS renders stowage-ebs with its default values, with each container switched to upstream's
// image, with metrics on, and with each sidecar left out; checks every result like the kustomize ones.
func TestHelmEBS(t *testing.T) {
	cases := []chartCase{{"defaults", nil}, {"metrics", set("controller.enableMetrics", true, "node.enableMetrics", true, "controller.serviceMonitor.forceEnable", true)}}
	for slot, path := range ebsSlots {
		cases = append(cases, chartCase{"upstream-" + slot, set(path+".upstream", true)})
	}
	for _, key := range ebsControllerSidecars {
		cases = append(cases, chartCase{"without-" + key, set("sidecars."+key+".enabled", false)})
	}
	cases = append(cases, chartCase{"taints", set("node.tolerateAllTaints", false, "controller.replicaCount", 3)})
	defaults := renderChart(t, "stowage-ebs", nil)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := renderChart(t, "stowage-ebs", c.values)
			checkObjects(t, objs)
			if slot, ok := strings.CutPrefix(c.name, "upstream-"); ok {
				checkOneImageSwapped(t, defaults, objs, slot)
			}
		})
	}
}

// TestHelmEBSMatchesKustomize: the chart with its defaults and the kustomize composition of every component
// run the same containers with the same args, env, mounts and probes (the chart adds labels only).
func TestHelmEBSMatchesKustomize(t *testing.T) {
	k := Kustomization{Resources: []string{kustomizeDir("ebs")}}
	for _, c := range sidecarComponents {
		k.Components = append(k.Components, kustomizeDir("components/"+c))
	}
	kpods, err := Pods(renderKustomization(t, k))
	if err != nil {
		t.Fatal(err)
	}
	hpods, err := Pods(renderChart(t, "stowage-ebs", withUpstreamRates("controller.userAgentExtra", "kustomize")))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, p := range kpods {
		for _, c := range p.Spec.Containers {
			want[p.Name+"/"+c.Name] = containerShape(t, c)
		}
	}
	got := map[string]string{}
	for _, p := range hpods {
		for _, c := range p.Spec.Containers {
			got[p.Name+"/"+c.Name] = containerShape(t, c)
		}
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s:\n helm      %s\n kustomize %s", k, got[k], w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: only in the chart", k)
		}
	}
}

// TestHelmEBSRateLimits: by default the chart passes Stowage's sidecars no --kube-api-qps or --kube-api-burst,
// so they run at the API server's pace; upstream's image in a slot keeps upstream's 20 and 100, the values set
// them, and an --kube-api-qps in additionalArgs (how upstream's chart users set it) is the last one, the one
// that counts.
func TestHelmEBSRateLimits(t *testing.T) {
	for _, key := range ebsControllerSidecars {
		name := "csi-" + key
		t.Run(key, func(t *testing.T) {
			for _, c := range []struct {
				name   string
				values map[string]any
				want   []string
			}{
				{"defaults", nil, nil},
				{"upstream image", set("sidecars."+key+".image.upstream", true), []string{"--kube-api-qps=20", "--kube-api-burst=100"}},
				{"values", set("sidecars."+key+".kubeAPIQPS", 50, "sidecars."+key+".kubeAPIBurst", 80), []string{"--kube-api-qps=50", "--kube-api-burst=80"}},
				{"qps alone", set("sidecars."+key+".kubeAPIQPS", 7.5), []string{"--kube-api-qps=7.5"}},
				{"additionalArgs", set("sidecars."+key+".image.upstream", true, "sidecars."+key+".additionalArgs", []any{"--kube-api-qps=7"}), []string{"--kube-api-qps=20", "--kube-api-burst=100", "--kube-api-qps=7"}},
			} {
				pods, err := Pods(renderChart(t, "stowage-ebs", c.values))
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, p := range pods {
					for _, ctr := range p.Spec.Containers {
						if ctr.Name != name {
							continue
						}
						found = true
						var got []string
						for _, a := range ctr.Args {
							if strings.HasPrefix(a, "--kube-api-qps") || strings.HasPrefix(a, "--kube-api-burst") {
								got = append(got, a)
							}
						}
						if !slices.Equal(got, c.want) {
							t.Errorf("%s: %s in %s passes %q, want %q", c.name, name, p.Name, got, c.want)
						}
					}
				}
				if !found {
					t.Errorf("%s: no container %s", c.name, name)
				}
			}
		})
	}
}

// containerShape is what a container runs, for comparing renderings: image, command, args, env, mounts,
// ports, probes and hooks.
func containerShape(t *testing.T, c corev1.Container) string {
	t.Helper()
	c.Resources, c.SecurityContext, c.ImagePullPolicy = corev1.ResourceRequirements{}, nil, ""
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// checkOneImageSwapped: switching one slot to upstream changes that container's image (in every pod it
// runs in) to a non-Stowage one and nothing else's.
func checkOneImageSwapped(t *testing.T, before, after []*unstructured.Unstructured, slot string) {
	t.Helper()
	b, a := images(t, before), images(t, after)
	changed := 0
	for c, img := range b {
		if strings.HasSuffix(c, "/"+slot) {
			if a[c] == img || strings.Contains(a[c], "stowage") {
				t.Errorf("%s: image %s after switching %s to upstream", c, a[c], slot)
			}
			changed++
		} else if a[c] != img {
			t.Errorf("%s: image changed from %s to %s when switching %s", c, img, a[c], slot)
		}
	}
	if changed == 0 {
		t.Errorf("no container %s", slot)
	}
}

// TestHelmS3 renders stowage-s3 with its defaults, with each image switched to upstream's, and with metrics,
// a PodDisruptionBudget and other tolerations; checks every result.
func TestHelmS3(t *testing.T) {
	cases := []chartCase{
		{"defaults", nil},
		{"upstream-s3-plugin", set("image.upstream", true)},
		{"upstream-s3-csi-controller", set("controller.image.upstream", true)},
		{"upstream-mountpoint", set("mountpointPod.image.upstream", true)},
		{"upstream-node-driver-registrar", set("sidecars.nodeDriverRegistrar.image.upstream", true)},
		{"upstream-liveness-probe", set("sidecars.livenessProbe.image.upstream", true)},
		{"metrics", set("controller.enableMetrics", true, "controller.serviceMonitor.forceEnable", true, "controller.podDisruptionBudget.enabled", true)},
		{"tolerate-all", set("node.tolerateAllTaints", true)},
		{"provisioner", set("sidecars.provisioner.enabled", true)},
		{"provisioner-metrics", set("sidecars.provisioner.enabled", true, "controller.enableMetrics", true, "controller.serviceMonitor.forceEnable", true)},
	}
	defaults := renderChart(t, "stowage-s3", nil)
	provisioner := renderChart(t, "stowage-s3", set("sidecars.provisioner.enabled", true))
	cases = append(cases, chartCase{"upstream-csi-provisioner", set("sidecars.provisioner.enabled", true, "sidecars.provisioner.image.upstream", true)})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := renderChart(t, "stowage-s3", c.values)
			checkObjects(t, objs)
			switch slot, _ := strings.CutPrefix(c.name, "upstream-"); slot {
			case c.name, "mountpoint":
			case "csi-provisioner":
				checkOneImageSwapped(t, provisioner, objs, slot)
			default:
				checkOneImageSwapped(t, defaults, objs, slot)
			}
		})
	}
	// Upstream's s3-controller has no CSI controller service: the chart refuses the combination.
	_, err := RenderChart(chartDir("stowage-s3"), "stowage", "kube-system", set("sidecars.provisioner.enabled", true, "controller.image.upstream", true))
	if err == nil || !strings.Contains(err.Error(), "controller.image.upstream") {
		t.Errorf("provisioner with upstream's s3-controller: %v, want an error naming controller.image.upstream", err)
	}
}

// TestHelmS3MatchesKustomize: the chart with its defaults and the s3 base run the same containers, and so
// do the chart with sidecars.provisioner.enabled and the base with the s3-dynamic-provisioning component.
func TestHelmS3MatchesKustomize(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		helmS3MatchesKustomize(t, nil, Kustomization{Resources: []string{kustomizeDir("s3")}})
	})
	t.Run("provisioner", func(t *testing.T) {
		helmS3MatchesKustomize(t, set("sidecars.provisioner.enabled", true), Kustomization{Resources: []string{kustomizeDir("s3")},
			Components: []string{kustomizeDir("components/s3-dynamic-provisioning")}})
	})
}

func helmS3MatchesKustomize(t *testing.T, values map[string]any, k Kustomization) {
	kpods, err := Pods(renderKustomization(t, k))
	if err != nil {
		t.Fatal(err)
	}
	hpods, err := Pods(renderChart(t, "stowage-s3", values))
	if err != nil {
		t.Fatal(err)
	}
	shapes := func(pods []Pod) map[string]string {
		out := map[string]string{}
		for _, p := range pods {
			for _, c := range p.Spec.Containers {
				out[p.Name+"/"+c.Name] = containerShape(t, c)
			}
		}
		return out
	}
	want, got := shapes(kpods), shapes(hpods)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s:\n helm      %s\n kustomize %s", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the chart runs %d containers, kustomize %d", len(got), len(want))
	}
}
