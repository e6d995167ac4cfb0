package ownwrites

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWrites(t *testing.T) {
	w := New()
	if w.Stale(at("5")) {
		t.Error("nothing written: Stale = true")
	}
	w.Wrote(at("5"), at("5")) // a patch helper that had nothing to send
	w.Wrote(at("5"), nil)     // a failed write
	var failed *metav1.ObjectMeta
	w.Wrote(at("5"), failed) // a failed write of a typed client
	if w.Stale(at("5")) {
		t.Error("a write that changed nothing made its version stale")
	}
	w.Wrote(at("5"), at("6"))
	w.Superseded("u1", "6")
	for _, rv := range []string{"5", "6"} {
		if !w.Stale(at(rv)) {
			t.Errorf("version %s, which our writes replaced: Stale = false", rv)
		}
	}
	if w.Stale(at("7")) {
		t.Error("the version after our writes: Stale = true")
	}
	if w.Stale(at("5")) {
		t.Error("after the cache caught up, an old version is still stale: the record was not dropped")
	}
	w.Wrote(at("7"), at("8"))
	w.Forget("u1")
	if w.Stale(at("7")) {
		t.Error("Forget kept the record")
	}
	other := &metav1.ObjectMeta{UID: "u2", ResourceVersion: "7"}
	if w.Stale(other) {
		t.Error("another object's version is stale")
	}
}
