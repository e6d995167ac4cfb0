package testutil

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestClientsetEnforcesResourceVersion(t *testing.T) {
	ctx := context.Background()
	c := NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}})
	cms := c.CoreV1().ConfigMaps("ns")
	first, err := cms.Get(ctx, "cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if first.ResourceVersion == "" {
		t.Fatal("seeded object has no resourceVersion")
	}

	fresh := first.DeepCopy()
	fresh.Data = map[string]string{"k": "v"}
	updated, err := cms.Update(ctx, fresh, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update with the current resourceVersion: %v", err)
	}
	if updated.ResourceVersion == first.ResourceVersion {
		t.Error("update did not change the resourceVersion")
	}

	tests := []struct {
		name string
		do   func() error
	}{
		{"stale update", func() error {
			_, err := cms.Update(ctx, first, metav1.UpdateOptions{})
			return err
		}},
		{"stale merge patch", func() error {
			_, err := cms.Patch(ctx, "cm", types.MergePatchType,
				[]byte(`{"metadata":{"resourceVersion":"`+first.ResourceVersion+`"},"data":{"k":"stale"}}`), metav1.PatchOptions{})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); !apierrors.IsConflict(err) {
				t.Fatalf("got %v, want Conflict", err)
			}
		})
	}
	current, err := cms.Patch(ctx, "cm", types.MergePatchType,
		[]byte(`{"metadata":{"resourceVersion":"`+updated.ResourceVersion+`"},"data":{"k":"new"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch with the current resourceVersion: %v", err)
	}
	if current.Data["k"] != "new" || current.ResourceVersion == updated.ResourceVersion {
		t.Errorf("patched data %v resourceVersion %s", current.Data, current.ResourceVersion)
	}
	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "ns"}}, metav1.CreateOptions{})
	if err != nil || created.ResourceVersion == "" {
		t.Fatalf("create: %v, resourceVersion %q", err, created.ResourceVersion)
	}
}
