package deploycheck

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// metricsComponents are the EBS components that serve metrics, in the order kustomize needs them: before
// the sidecar components, which add their ports to what these render.
var metricsComponents = []string{"metrics", "service-monitor"}

// TestKustomizeMetricsCompositions renders the EBS base with the metrics components and every subset of the
// sidecar components: every check of the other renders, and every Service and ServiceMonitor port reaches a
// port a selected container declares (checkServices, in checkObjects).
func TestKustomizeMetricsCompositions(t *testing.T) {
	for mask := range 1 << len(sidecarComponents) {
		k := Kustomization{Resources: []string{kustomizeDir("ebs")}}
		var chosen []string
		for _, c := range metricsComponents {
			k.Components = append(k.Components, kustomizeDir("components/"+c))
		}
		for i, c := range sidecarComponents {
			if mask&(1<<i) != 0 {
				chosen = append(chosen, c)
				k.Components = append(k.Components, kustomizeDir("components/"+c))
			}
		}
		t.Run("ebs+metrics+"+strings.Join(chosen, "+"), func(t *testing.T) {
			objs := renderKustomization(t, k)
			checkObjects(t, objs)
			svc := find(objs, "Service", "kube-system", "ebs-csi-controller")
			if svc == nil {
				t.Fatal("no Service ebs-csi-controller")
			}
			ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
			want := 1 // ebs-plugin's
			for _, c := range chosen {
				if c != "liveness-probe" {
					want++
				}
			}
			if len(ports) != want {
				t.Errorf("Service ebs-csi-controller has %d ports, want %d (ebs-plugin and each sidecar chosen): %v", len(ports), want, ports)
			}
		})
	}
}

// TestKustomizeMetricsMatchesChart: the metrics components compose what the charts render with metrics on:
// the same containers (args, ports), the same Service ports and ServiceMonitor endpoints.
func TestKustomizeMetricsMatchesChart(t *testing.T) {
	ebs := Kustomization{Resources: []string{kustomizeDir("ebs")}}
	for _, c := range append(slices.Clone(metricsComponents), sidecarComponents...) {
		ebs.Components = append(ebs.Components, kustomizeDir("components/"+c))
	}
	s3 := Kustomization{Resources: []string{kustomizeDir("s3")}}
	for _, c := range []string{"s3-metrics", "s3-service-monitor", "s3-dynamic-provisioning"} {
		s3.Components = append(s3.Components, kustomizeDir("components/"+c))
	}
	cases := []struct {
		name, chart string
		values      map[string]any
		k           Kustomization
	}{
		{"ebs", "stowage-ebs", withUpstreamRates("controller.userAgentExtra", "kustomize", "controller.enableMetrics", true, "node.enableMetrics", true,
			"controller.serviceMonitor.forceEnable", true, "node.serviceMonitor.forceEnable", true), ebs},
		{"s3", "stowage-s3", set("controller.enableMetrics", true, "controller.serviceMonitor.forceEnable", true, "sidecars.provisioner.enabled", true), s3},
		{"s3-without-provisioner", "stowage-s3", set("controller.enableMetrics", true),
			Kustomization{Resources: []string{kustomizeDir("s3")}, Components: []string{kustomizeDir("components/s3-metrics")}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kobjs, hobjs := renderKustomization(t, c.k), renderChart(t, c.chart, c.values)
			want, got := metricsShape(t, kobjs), metricsShape(t, hobjs)
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
		})
	}
}

// metricsShape is, by object, what serves and scrapes metrics: each container's shape (ports in port order),
// each Service's ports and each ServiceMonitor's endpoints (sorted; a ServiceMonitor's namespaceSelector, which
// kustomize leaves out as the Service is in its namespace, is not compared).
func metricsShape(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	pods, err := Pods(objs)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			sort.Slice(c.Ports, func(i, j int) bool { return c.Ports[i].ContainerPort < c.Ports[j].ContainerPort })
			out[p.Name+"/"+c.Name] = containerShape(t, c)
		}
	}
	for _, o := range objs {
		var items []any
		switch o.GetKind() {
		case "Service":
			items, _, _ = unstructured.NestedSlice(o.Object, "spec", "ports")
		case "ServiceMonitor":
			items, _, _ = unstructured.NestedSlice(o.Object, "spec", "endpoints")
		default:
			continue
		}
		var s []string
		for _, i := range items {
			s = append(s, fmt.Sprint(i))
		}
		sort.Strings(s)
		out[o.GetKind()+"/"+o.GetName()] = strings.Join(s, " ")
	}
	return out
}

// checkServices: every port of a Service reaches a port declared by a container of a pod its selector
// selects, and every ServiceMonitor endpoint names a port of a Service it selects (by name) or a container
// port of the pods behind it (targetPort).
func checkServices(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	type workload struct {
		labels labels.Set
		spec   corev1.PodSpec
	}
	var workloads []workload
	for _, o := range objs {
		if o.GetKind() != "Deployment" && o.GetKind() != "DaemonSet" {
			continue
		}
		m, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
		ps, err := Pods([]*unstructured.Unstructured{o})
		if err != nil {
			t.Fatal(err)
		}
		workloads = append(workloads, workload{m, ps[0].Spec})
	}
	declared := func(sel map[string]string, port string) bool {
		for _, w := range workloads {
			if !labels.SelectorFromSet(sel).Matches(w.labels) {
				continue
			}
			for _, c := range w.spec.Containers {
				for _, p := range c.Ports {
					if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
						return true
					}
				}
			}
		}
		return false
	}
	services := map[string]corev1.Service{}
	for _, o := range objs {
		if o.GetKind() != "Service" {
			continue
		}
		var s corev1.Service
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &s); err != nil {
			t.Fatal(err)
		}
		services[s.Name] = s
		for _, p := range s.Spec.Ports {
			if !declared(s.Spec.Selector, p.TargetPort.String()) {
				t.Errorf("Service %s: port %s targets %s, which no container of the pods it selects declares", s.Name, p.Name, p.TargetPort.String())
			}
		}
	}
	for _, o := range objs {
		if o.GetKind() != "ServiceMonitor" {
			continue
		}
		sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
		endpoints, _, _ := unstructured.NestedSlice(o.Object, "spec", "endpoints")
		for _, e := range endpoints {
			e, _ := e.(map[string]any)
			port, target := fmt.Sprint(e["port"]), fmt.Sprint(e["targetPort"])
			ok := false
			for _, s := range services {
				if !labels.SelectorFromSet(sel).Matches(labels.Set(s.Labels)) {
					continue
				}
				for _, p := range s.Spec.Ports {
					if (e["port"] != nil && p.Name == port) || (e["targetPort"] != nil && declared(s.Spec.Selector, target)) {
						ok = true
					}
				}
			}
			if !ok {
				t.Errorf("ServiceMonitor %s: endpoint %v reaches no port of a Service it selects", o.GetName(), e)
			}
		}
	}
}
