package patch

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

const (
	intentKey  = "stowage.io/intent"
	protection = "kubernetes.io/pv-protection"
	otherOwner = "example.com/other"
)

func TestRemoveOwnedRemovesWhatItSaw(t *testing.T) {
	tests := []struct {
		name            string
		finalizers      []string
		annotations     map[string]string
		owned           Owned
		wantPatch       bool
		wantFinalizers  []string
		wantAnnotations map[string]string
	}{
		{name: "finalizer between others", finalizers: []string{protection, attacherFinalizer, otherOwner},
			owned: Owned{Finalizers: []string{attacherFinalizer}}, wantPatch: true,
			wantFinalizers: []string{protection, otherOwner}},
		{name: "last finalizer", finalizers: []string{attacherFinalizer},
			owned: Owned{Finalizers: []string{attacherFinalizer}}, wantPatch: true},
		{name: "every occurrence of a finalizer", finalizers: []string{attacherFinalizer, protection, attacherFinalizer},
			owned: Owned{Finalizers: []string{attacherFinalizer}}, wantPatch: true, wantFinalizers: []string{protection}},
		{name: "two finalizers, slots tested from the end", finalizers: []string{intentKey, protection, attacherFinalizer},
			owned: Owned{Finalizers: []string{attacherFinalizer, intentKey}}, wantPatch: true, wantFinalizers: []string{protection}},
		{name: "annotation whose key needs escaping", annotations: map[string]string{"a/b~c": "v", "other": "x"},
			owned: Owned{Annotations: []string{"a/b~c"}}, wantPatch: true, wantAnnotations: map[string]string{"other": "x"}},
		{name: "annotation with an empty value", annotations: map[string]string{intentKey: "", "other": "x"},
			owned: Owned{Annotations: []string{intentKey, intentKey}}, wantPatch: true, wantAnnotations: map[string]string{"other": "x"}},
		{name: "finalizer and annotation in one patch", finalizers: []string{protection, intentKey},
			annotations: map[string]string{intentKey: "pvc-1", "other": "x"},
			owned:       Owned{Finalizers: []string{intentKey}, Annotations: []string{intentKey}}, wantPatch: true,
			wantFinalizers: []string{protection}, wantAnnotations: map[string]string{"other": "x"}},
		{name: "nothing owned is there: no request", finalizers: []string{protection},
			annotations:    map[string]string{"other": "x"},
			owned:          Owned{Finalizers: []string{intentKey}, Annotations: []string{intentKey}},
			wantFinalizers: []string{protection}, wantAnnotations: map[string]string{"other": "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, stored := seed(t, pv(tt.finalizers, tt.annotations))
			got, err := RemoveOwned(context.Background(), c.CoreV1().PersistentVolumes().Patch, stored, tt.owned)
			if err != nil {
				t.Fatal(err)
			}
			ps := patches(c)
			if want := map[bool]int{false: 0, true: 1}[tt.wantPatch]; len(ps) != want || len(c.Actions()) != want {
				t.Fatalf("%d patches in %d actions, want %d and nothing else", len(ps), len(c.Actions()), want)
			}
			if !slices.Equal(got.Finalizers, tt.wantFinalizers) {
				t.Errorf("finalizers %v, want %v", got.Finalizers, tt.wantFinalizers)
			}
			if !maps.Equal(got.Annotations, tt.wantAnnotations) {
				t.Errorf("annotations %v, want %v", got.Annotations, tt.wantAnnotations)
			}
			if !tt.wantPatch {
				if got != stored {
					t.Error("no request, but the object returned is not the one passed in")
				}
				return
			}
			if ps[0].GetPatchType() != types.JSONPatchType {
				t.Fatalf("patch type %s, want a JSON patch", ps[0].GetPatchType())
			}
			var ops []map[string]any
			if err := json.Unmarshal(ps[0].GetPatch(), &ops); err != nil {
				t.Fatal(err)
			}
			// Every remove is preceded by a test of the same path, and nothing else is in the patch.
			for i := 0; i < len(ops); i += 2 {
				if i+1 >= len(ops) || ops[i]["op"] != "test" || ops[i+1]["op"] != "remove" || ops[i]["path"] != ops[i+1]["path"] {
					t.Fatalf("patch %s is not test/remove pairs on the same path", ps[0].GetPatch())
				}
				if _, ok := ops[i]["value"]; !ok {
					t.Errorf("test op %v carries no value", ops[i])
				}
			}
		})
	}
}

// The removal follows a write that changed the resourceVersion (here someone else's label): the merge patch
// helpers would answer Conflict, RemoveOwned needs no re-read.
func TestRemoveOwnedSurvivesUnrelatedWrites(t *testing.T) {
	ctx := context.Background()
	c, stored := seed(t, pv([]string{protection, attacherFinalizer}, map[string]string{intentKey: "pvc-1"}))
	pvs := c.CoreV1().PersistentVolumes()
	other := stored.DeepCopy()
	other.Labels = map[string]string{"team": "storage"}
	if _, err := pvs.Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := RemoveOwned(ctx, pvs.Patch, stored, Owned{Finalizers: []string{attacherFinalizer}, Annotations: []string{intentKey}})
	if err != nil {
		t.Fatalf("RemoveOwned after an unrelated write: %v", err)
	}
	if !slices.Equal(got.Finalizers, []string{protection}) || len(got.Annotations) != 0 || got.Labels["team"] != "storage" {
		t.Errorf("got finalizers %v annotations %v labels %v; want only our entries gone", got.Finalizers, got.Annotations, got.Labels)
	}
}

// A concurrent writer changed what the caller saw: the patch must fail and leave the object as that writer
// left it, never remove an entry in the slot ours used to be in.
func TestRemoveOwnedFailsWhenWhatItSawChanged(t *testing.T) {
	tests := []struct {
		name        string
		finalizers  []string
		annotations map[string]string
		owned       Owned
		concurrent  func(*corev1.PersistentVolume)
	}{
		{
			name:       "our finalizer's slot now holds another finalizer",
			finalizers: []string{protection, attacherFinalizer},
			owned:      Owned{Finalizers: []string{attacherFinalizer}},
			concurrent: func(o *corev1.PersistentVolume) { o.Finalizers = []string{attacherFinalizer, otherOwner} },
		},
		{
			name:       "our finalizer's slot is gone",
			finalizers: []string{protection, attacherFinalizer},
			owned:      Owned{Finalizers: []string{attacherFinalizer}},
			concurrent: func(o *corev1.PersistentVolume) { o.Finalizers = []string{attacherFinalizer} },
		},
		{
			name:        "the annotation has another value",
			annotations: map[string]string{intentKey: "pvc-1"},
			owned:       Owned{Annotations: []string{intentKey}},
			concurrent:  func(o *corev1.PersistentVolume) { o.Annotations[intentKey] = "pvc-2" },
		},
		{
			name:        "one of two entries changed: neither is removed",
			finalizers:  []string{intentKey},
			annotations: map[string]string{intentKey: "pvc-1"},
			owned:       Owned{Finalizers: []string{intentKey}, Annotations: []string{intentKey}},
			concurrent:  func(o *corev1.PersistentVolume) { o.Annotations[intentKey] = "pvc-2" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			c, stored := seed(t, pv(tt.finalizers, tt.annotations))
			pvs := c.CoreV1().PersistentVolumes()
			other := stored.DeepCopy()
			tt.concurrent(other)
			written, err := pvs.Update(ctx, other, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := RemoveOwned(ctx, pvs.Patch, stored, tt.owned); err == nil {
				t.Fatal("RemoveOwned succeeded although the entries it saw changed")
			}
			now, err := pvs.Get(ctx, stored.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if now.ResourceVersion != written.ResourceVersion || !slices.Equal(now.Finalizers, written.Finalizers) ||
				!maps.Equal(now.Annotations, written.Annotations) {
				t.Errorf("object changed by a failed patch: finalizers %v annotations %v, want %v %v",
					now.Finalizers, now.Annotations, written.Finalizers, written.Annotations)
			}
		})
	}
}

func TestRemoveOwnedWorksWithDynamicClient(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"name": "snap-1", "namespace": "ns", "resourceVersion": "7",
			"finalizers": []any{"snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection", protection}},
	}}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "VolumeSnapshotList"}, obj)
	got, err := RemoveOwned(context.Background(), client.Resource(gvr).Namespace("ns").Patch, obj,
		Owned{Finalizers: []string{"snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.GetFinalizers(), []string{protection}) {
		t.Errorf("finalizers %v, want [%s]", got.GetFinalizers(), protection)
	}
}
