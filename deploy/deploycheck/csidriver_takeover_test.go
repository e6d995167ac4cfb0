package deploycheck

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

var csiDrivers = schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "csidrivers"}

// clusterWith answers the chart's lookups from a fake cluster holding objs, as `helm install` answers them
// from the real one.
type clusterWith struct{ client dynamic.Interface }

func (c clusterWith) GetClientFor(_, _ string) (dynamic.NamespaceableResourceInterface, bool, error) {
	return c.client.Resource(csiDrivers), false, nil
}

func renderAgainst(t *testing.T, chart string, objs ...runtime.Object) (map[string]string, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir(chart))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(chrt, nil, chartutil.ReleaseOptions{Name: "stowage", Namespace: "kube-system", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{csiDrivers: "CSIDriverList"}, objs...)
	return engine.RenderWithClientProvider(chrt, vals, clusterWith{client})
}

func csiDriver(modes ...any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
		"metadata": map[string]any{"name": "s3.csi.aws.com"},
		"spec":     map[string]any{"attachRequired": false, "podInfoOnMount": true, "volumeLifecycleModes": modes},
	}}
}

// TestHelmS3TakesOverCSIDriver: installing stowage-s3 where upstream's driver registered s3.csi.aws.com
// (volumeLifecycleModes Persistent only, immutable) stops before any object is written, naming the field and
// the command that clears the way; over its own object (a Stowage upgrade) or on a cluster without one, it
// renders the object.
func TestHelmS3TakesOverCSIDriver(t *testing.T) {
	_, err := renderAgainst(t, "stowage-s3", csiDriver("Persistent"))
	if err == nil {
		t.Fatal("install over upstream's CSIDriver rendered; the API server would refuse the object halfway through the install")
	}
	for _, want := range []string{"spec.volumeLifecycleModes [Persistent]", "[Ephemeral Persistent]", "kubectl delete csidriver s3.csi.aws.com"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	for name, objs := range map[string][]runtime.Object{
		"Stowage's own object": {csiDriver("Ephemeral", "Persistent")},
		"no object":            nil,
	} {
		files, err := renderAgainst(t, "stowage-s3", objs...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rendered, err := ParseObjects([]byte(files["stowage-s3/templates/csidriver.yaml"]))
		if err != nil || len(rendered) != 1 || rendered[0].GetKind() != "CSIDriver" {
			t.Fatalf("%s: rendered %v, %v", name, rendered, err)
		}
	}
}
