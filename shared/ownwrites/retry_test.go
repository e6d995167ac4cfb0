package ownwrites

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A write that meets a conflict is repeated on the re-read copy, and the version the successful write replaced
// is then stale.
func TestRetryRecordsTheWrite(t *testing.T) {
	cm := func(rv string) *v1.ConfigMap {
		return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", UID: "u1", ResourceVersion: rv}}
	}
	w := New()
	get := func(context.Context) (*v1.ConfigMap, error) { return cm("2"), nil }
	var wroteOn []string
	write := func(_ context.Context, cur *v1.ConfigMap) (*v1.ConfigMap, error) {
		wroteOn = append(wroteOn, cur.ResourceVersion)
		if cur.ResourceVersion == "1" {
			return nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "c", nil)
		}
		return cm("3"), nil
	}
	got, err := Retry(context.Background(), w, cm("1"), get, write)
	if err != nil || got.ResourceVersion != "3" {
		t.Fatalf("Retry = %v, %v; want version 3", got, err)
	}
	if len(wroteOn) != 2 || wroteOn[0] != "1" || wroteOn[1] != "2" {
		t.Errorf("writes on versions %v, want [1 2]", wroteOn)
	}
	if !w.Stale(cm("2")) {
		t.Error("the version the write replaced is not stale")
	}
	if w.Stale(cm("3")) {
		t.Error("the written version is stale")
	}
}
