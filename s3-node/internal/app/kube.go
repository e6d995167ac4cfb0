package app

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/s3api"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// nodeNameSelectable reports whether the CRD declares spec.nodeName a selectable field (Kubernetes 1.32+
// and the CRD of upstream v2); without it the node lists every attachment and filters itself, as upstream.
func nodeNameSelectable(ctx context.Context, client dynamic.Interface) bool {
	crd, err := client.Resource(crdResource).Get(ctx, s3api.CRDName, metav1.GetOptions{})
	if err != nil {
		klog.FromContext(ctx).Info("Cannot read the attachment CRD; watching all attachments", "crd", s3api.CRDName, "err", err.Error())
		return false
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		if vm["name"] != s3api.Version {
			continue
		}
		sel, _, _ := unstructured.NestedSlice(vm, "selectableFields")
		for _, f := range sel {
			if fm, _ := f.(map[string]any); fm["jsonPath"] == ".spec.nodeName" {
				return true
			}
		}
	}
	return false
}

// attachmentInformer watches this node's attachments; its cache holds typed objects.
func attachmentInformer(ctx context.Context, client dynamic.Interface, node string) (cache.SharedIndexInformer, func() ([]*s3api.MountpointS3PodAttachment, error)) {
	selectable := nodeNameSelectable(ctx, client)
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, metav1.NamespaceAll, func(o *metav1.ListOptions) {
		if selectable {
			o.FieldSelector = fields.OneTermEqualSelector(s3api.FieldNodeName, node).String()
		}
	})
	inf := factory.ForResource(s3api.GroupVersionResource()).Informer()
	_ = inf.SetTransform(func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		a := &s3api.MountpointS3PodAttachment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, a); err != nil {
			return nil, fmt.Errorf("decode MountpointS3PodAttachment %s: %w", u.GetName(), err)
		}
		a.ManagedFields = nil
		return a, nil
	})
	list := func() ([]*s3api.MountpointS3PodAttachment, error) {
		var out []*s3api.MountpointS3PodAttachment
		err := cache.ListAll(inf.GetIndexer(), labels.Everything(), func(o any) {
			if a, ok := o.(*s3api.MountpointS3PodAttachment); ok && a.Spec.NodeName == node {
				out = append(out, a)
			}
		})
		return out, err
	}
	return inf, list
}

// kubernetesVersion is the API server's version for Mountpoint's user agent, or "" when unknown.
func kubernetesVersion(c *clients) string {
	v, err := c.kube.Discovery().ServerVersion()
	if err != nil {
		return ""
	}
	return v.GitVersion
}

// newInformerFactoryResync is how often informers resync: never; the unmounter sweeps on its own.
const newInformerFactoryResync = time.Duration(0)
