package deploycheck

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Kustomization is an overlay composed in a temporary folder: the bases and components it lists (absolute
// folders), and images to substitute, as a user's kustomization.yaml would.
type Kustomization struct {
	Namespace  string // the namespace field: moves every namespaced object (and ServiceAccount subjects) there
	Resources  []string
	Components []string
	Images     []types.Image
}

// RenderKustomization writes k into dir and builds it with krusty, the library kustomize and kubectl are
// built from, with the default load restrictions (files only from inside each kustomization's folder).
func RenderKustomization(dir string, k Kustomization) ([]*unstructured.Unstructured, error) {
	doc := types.Kustomization{
		TypeMeta:  types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
		Namespace: k.Namespace,
		Images:    k.Images,
	}
	// kustomize takes bases and components by relative path only.
	rel := func(paths []string) ([]string, error) {
		var out []string
		for _, p := range paths {
			r, err := filepath.Rel(dir, p)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	}
	var err error
	if doc.Resources, err = rel(k.Resources); err != nil {
		return nil, err
	}
	if doc.Components, err = rel(k.Components); err != nil {
		return nil, err
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), data, 0o644); err != nil {
		return nil, err
	}
	return RenderKustomizeDir(dir)
}

// RenderKustomizeDir builds the kustomization in dir.
func RenderKustomizeDir(dir string) ([]*unstructured.Unstructured, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, err
	}
	return ParseObjects(out)
}

// RenderChart renders the chart in dir with values merged over its values.yaml, as `helm template` does
// (release name and namespace given), and returns the objects of every template.
func RenderChart(dir, release, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	chrt, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	if err := chartutil.ProcessDependenciesWithMerge(chrt, values); err != nil {
		return nil, err
	}
	opts := chartutil.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}
	vals, err := chartutil.ToRenderValues(chrt, values, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("values for %s: %w", dir, err)
	}
	files, err := engine.Render(chrt, vals)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dir, err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names) // a stable order: templates in file name order, as helm template prints them
	var all bytes.Buffer
	for _, name := range names {
		content := files[name]
		if !strings.HasSuffix(name, ".yaml") || strings.TrimSpace(content) == "" {
			continue
		}
		all.WriteString("---\n# " + name + "\n" + content + "\n")
	}
	objs, err := ParseObjects(all.Bytes())
	if err != nil {
		return nil, err
	}
	// helm install applies the chart's crds/ folder before the templates.
	for _, crd := range chrt.CRDObjects() {
		o, err := ParseObjects(crd.File.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", crd.Filename, err)
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

// ParseObjects decodes a multi-document YAML stream; every document must be a Kubernetes object.
func ParseObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if err == io.EOF {
				return objs, nil
			}
			return nil, err
		}
		if m == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("a document without apiVersion, kind or metadata.name: %v", m)
		}
		objs = append(objs, u)
	}
}

// ParseFile reads the objects of one YAML file.
func ParseFile(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := ParseObjects(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}
