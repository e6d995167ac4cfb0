package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestSnapshotCRDsFromModule checks that the snapshot client module is found through the go command and
// that its manifests decode to the three snapshot.storage.k8s.io CRDs, each serving and storing v1, with the
// status subresource the rig writes for contents and snapshots.
func TestSnapshotCRDsFromModule(t *testing.T) {
	dir, err := snapshotModuleDir(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	type crdWant struct {
		scope  apiextensionsv1.ResourceScope
		status bool
	}
	want := map[string]crdWant{
		"volumesnapshotclasses.snapshot.storage.k8s.io":  {apiextensionsv1.ClusterScoped, false},
		"volumesnapshotcontents.snapshot.storage.k8s.io": {apiextensionsv1.ClusterScoped, true},
		"volumesnapshots.snapshot.storage.k8s.io":        {apiextensionsv1.NamespaceScoped, true},
	}
	for _, rel := range snapshotCRDFiles() {
		crd, err := readCRD(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[crd.Name]
		if !ok {
			t.Errorf("%s holds unexpected CRD %s", rel, crd.Name)
			continue
		}
		delete(want, crd.Name)
		if crd.Spec.Group != "snapshot.storage.k8s.io" || crd.Spec.Scope != w.scope {
			t.Errorf("CRD %s: group %s scope %s, want snapshot.storage.k8s.io %s", crd.Name, crd.Spec.Group, crd.Spec.Scope, w.scope)
		}
		v1Stored := false
		for _, v := range crd.Spec.Versions {
			status := v.Subresources != nil && v.Subresources.Status != nil
			if v.Name == "v1" && v.Served && v.Storage && status == w.status {
				v1Stored = true
			}
		}
		if !v1Stored {
			t.Errorf("CRD %s does not serve and store v1 (status subresource wanted: %v)", crd.Name, w.status)
		}
	}
	if len(want) != 0 {
		t.Errorf("CRDs missing: %v", want)
	}
}

func TestReadCRDRejectsOtherKinds(t *testing.T) {
	tests := map[string]string{
		"another kind":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
		"no name":       "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec:\n  group: g\n",
		"unknown field": "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: a.b\nspek: {}\n",
	}
	for name, doc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "crd.yaml")
			if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := readCRD(path); err == nil || !strings.Contains(err.Error(), path) {
				t.Errorf("readCRD accepted it or did not name the file: %v", err)
			}
		})
	}
}
