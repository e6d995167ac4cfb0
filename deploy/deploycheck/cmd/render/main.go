// Command render writes what deploy/ installs, rendered as a user would (kustomize compositions and the Helm
// charts with their default values), one YAML file per installation, for e2e/deployapply to apply to a real
// API server. Objects are in Helm's install order, so each file applies in document order. Run from deploy/deploycheck with GOWORK=off.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"helm.sh/helm/v3/pkg/releaseutil"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/stowage-csi/stowage/deploy/deploycheck"
)

func main() {
	root := flag.String("root", "../..", "the repository's work tree")
	out := flag.String("out", "", "folder to write the rendered files into (required)")
	namespace := flag.String("namespace", "stowage-deploy", "namespace prefix for the drivers (kube-system in the defaults): the "+
		"kustomize renders go to <prefix>-kustomize, the charts to <prefix>-helm, so both can be applied to one cluster")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "render: -out is required")
		os.Exit(2)
	}
	if err := run(*root, *out, *namespace); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

func run(root, out, prefix string) error {
	namespace, helmNamespace := prefix+"-kustomize", prefix+"-helm"
	kdir := func(p string) (string, error) { return filepath.Abs(filepath.Join(root, "deploy/kustomize", p)) }
	var ebs deploycheck.Kustomization
	ebs.Namespace = namespace
	base, err := kdir("ebs")
	if err != nil {
		return err
	}
	ebs.Resources = []string{base}
	// metrics first: the sidecar components add their ports to its Service. No ServiceMonitor: the test cluster
	// has no Prometheus operator CRDs.
	for _, c := range []string{"metrics", "csi-provisioner", "csi-attacher", "csi-resizer", "csi-snapshotter", "liveness-probe"} {
		d, err := kdir("components/" + c)
		if err != nil {
			return err
		}
		ebs.Components = append(ebs.Components, d)
	}
	snap, err := kdir("snapshot-controller")
	if err != nil {
		return err
	}
	s3, err := kdir("s3")
	if err != nil {
		return err
	}
	s3Provisioning, err := kdir("components/s3-dynamic-provisioning")
	if err != nil {
		return err
	}
	s3Metrics, err := kdir("components/s3-metrics")
	if err != nil {
		return err
	}
	type rendering struct {
		namespace string // created first in the file
		render    func(dir string) ([]*unstructured.Unstructured, error)
	}
	renders := map[string]rendering{
		"kustomize-ebs.yaml": {namespace, func(dir string) ([]*unstructured.Unstructured, error) {
			return deploycheck.RenderKustomization(dir, ebs)
		}},
		"kustomize-snapshot-controller.yaml": {namespace, func(dir string) ([]*unstructured.Unstructured, error) {
			return deploycheck.RenderKustomization(dir, deploycheck.Kustomization{Namespace: namespace, Resources: []string{snap}})
		}},
		// The S3 base names two namespaces (kube-system for the driver, mount-s3), so it is applied as written;
		// with metrics and dynamic provisioning (csi-provisioner in s3-controller's pod), which the chart's
		// defaults leave out.
		"kustomize-s3.yaml": {"kube-system", func(dir string) ([]*unstructured.Unstructured, error) {
			return deploycheck.RenderKustomization(dir, deploycheck.Kustomization{Resources: []string{s3}, Components: []string{s3Metrics, s3Provisioning}})
		}},
		"helm-stowage-ebs.yaml": {helmNamespace, func(string) ([]*unstructured.Unstructured, error) {
			return deploycheck.RenderChart(filepath.Join(root, "deploy/helm/stowage-ebs"), "stowage", helmNamespace, nil)
		}},
		"helm-stowage-s3.yaml": {helmNamespace, func(string) ([]*unstructured.Unstructured, error) {
			return deploycheck.RenderChart(filepath.Join(root, "deploy/helm/stowage-s3"), "stowage", helmNamespace, nil)
		}},
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for name, r := range renders {
		tmp, err := os.MkdirTemp("", "render-")
		if err != nil {
			return err
		}
		objs, err := r.render(tmp)
		os.RemoveAll(tmp)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := write(filepath.Join(out, name), r.namespace, objs); err != nil {
			return err
		}
	}
	return nil
}

// write puts the namespace first (the charts install into it, as helm install --create-namespace would), then
// the objects in Helm's install order (Namespaces, ServiceAccounts, CRDs, RBAC, ..., workloads last), as helm
// install and kubectl apply -k send them.
func write(path, namespace string, objs []*unstructured.Unstructured) error {
	rank := func(o *unstructured.Unstructured) int {
		if i := slices.Index(releaseutil.InstallOrder, o.GetKind()); i >= 0 {
			return i
		}
		return len(releaseutil.InstallOrder)
	}
	sort.SliceStable(objs, func(i, j int) bool { return rank(objs[i]) < rank(objs[j]) })
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": namespace}}}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, o := range append([]*unstructured.Unstructured{ns}, objs...) {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(f, "---\n%s", data); err != nil {
			return err
		}
	}
	return f.Close()
}
