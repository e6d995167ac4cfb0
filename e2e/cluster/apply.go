package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// applyFieldManager owns the fields Apply sets (server-side apply).
const applyFieldManager = "stowage-e2e"

// noMatchWait bounds how long Apply waits for a kind to appear, e.g. a custom resource whose
// CustomResourceDefinition was applied just before it.
const noMatchWait = 30 * time.Second

func (c *Cluster) initApply() error {
	disco, err := discovery.NewDiscoveryClientForConfig(c.RESTConfig())
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	if c.dynamic, err = dynamic.NewForConfig(c.RESTConfig()); err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	return nil
}

// Apply server-side applies every object in the given YAML files (multi-document files welcome) as the
// admin, in file and document order. Namespaced objects without a namespace go to "default". A kind the
// API server does not know yet (a CRD applied just before) is waited for briefly.
func (c *Cluster) Apply(ctx context.Context, files ...string) error {
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		objs, err := decodeManifests(data)
		if err != nil {
			return fmt.Errorf("apply %s: %w", file, err)
		}
		for _, obj := range objs {
			if err := c.applyObject(ctx, obj); err != nil {
				return fmt.Errorf("apply %s: %s %s: %w", file, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}

// decodeManifests splits YAML or JSON documents into objects, skipping empty documents.
func decodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("document %d: %w", len(objs)+1, err)
		}
		if len(raw) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: raw}
		if obj.GetAPIVersion() == "" || obj.GetKind() == "" || obj.GetName() == "" {
			return nil, fmt.Errorf("document %d: apiVersion, kind and metadata.name are required", len(objs)+1)
		}
		objs = append(objs, obj)
	}
}

func (c *Cluster) applyObject(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	var mapping *meta.RESTMapping
	ctxWait, cancel := context.WithTimeout(ctx, noMatchWait)
	defer cancel()
	err := wait.PollUntilContextCancel(ctxWait, 500*time.Millisecond, true, func(context.Context) (bool, error) {
		var err error
		mapping, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			c.mapper.Reset() // rediscover: the kind may have been added since the last lookup
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("find resource for %s: %w", gvk, err)
	}

	var res dynamic.ResourceInterface = c.dynamic.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
			obj.SetNamespace(ns)
		}
		res = c.dynamic.Resource(mapping.Resource).Namespace(ns)
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	force := true
	_, err = res.Patch(ctx, obj.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: applyFieldManager, Force: &force})
	return err
}
