package app

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/stowage-csi/stowage/shared/s3api"
)

func crd(selectable bool) *unstructured.Unstructured {
	v := map[string]any{"name": "v2", "served": true, "storage": true}
	if selectable {
		v["selectableFields"] = []any{map[string]any{"jsonPath": ".spec.nodeName"}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": s3api.CRDName},
		"spec":     map[string]any{"versions": []any{v}},
	}}
}

func attachment(name, node string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "s3.csi.aws.com/v2", "kind": "MountpointS3PodAttachment",
		"metadata": map[string]any{"name": name, "managedFields": []any{map[string]any{"manager": "x"}}},
		"spec": map[string]any{"nodeName": node, "persistentVolumeName": "pv", "volumeID": "vol",
			"mountpointS3PodAttachments": map[string]any{"mp-" + name: []any{map[string]any{"workloadPodUID": "w", "attachmentTime": "2026-01-01T00:00:00Z"}}}},
	}}
}

func fakeDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		crdResource:                  "CustomResourceDefinitionList",
		s3api.GroupVersionResource(): "MountpointS3PodAttachmentList",
	}, objs...)
}

func TestNodeNameSelectable(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		objs []runtime.Object
		want bool
	}{
		{"declared", []runtime.Object{crd(true)}, true},
		{"not declared (CRD before Kubernetes 1.32)", []runtime.Object{crd(false)}, false},
		{"CRD unreadable", nil, false},
	} {
		if got := nodeNameSelectable(ctx, fakeDynamic(tt.objs...)); got != tt.want {
			t.Errorf("%s: nodeNameSelectable = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// The informer's cache holds typed attachments without managed fields, and the lister returns only this
// node's even when the server could not filter.
func TestAttachmentInformer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inf, list := attachmentInformer(ctx, fakeDynamic(crd(false), attachment("a", "n1"), attachment("b", "n2")), "n1")
	go inf.RunWithContext(ctx)
	syncCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	got, err := list()
	if err != nil || len(got) != 1 {
		t.Fatalf("list = %v, %v", got, err)
	}
	a := got[0]
	if a.Name != "a" || a.MountpointPodFor("w") != "mp-a" || a.ManagedFields != nil {
		t.Fatalf("attachment %+v", a)
	}
}
