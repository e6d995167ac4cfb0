package testutil

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestActionsNamesVerbResourceAndObject(t *testing.T) {
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1", ResourceVersion: "1"}}
	client := NewClientset(pv)
	ctx := context.Background()
	if _, err := client.CoreV1().PersistentVolumes().Get(ctx, "pv-1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().PersistentVolumes().Patch(ctx, "pv-1", types.MergePatchType, []byte(`{"status":{"phase":"Bound"}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"get persistentvolumes pv-1", "patch persistentvolumes/status pv-1", "list persistentvolumes "}
	if got := Actions(client); !slices.Equal(got, want) {
		t.Errorf("Actions = %q, want %q", got, want)
	}
}
