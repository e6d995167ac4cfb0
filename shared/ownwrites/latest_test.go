package ownwrites

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func at(rv string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Name: "s", UID: "u1", ResourceVersion: rv}
}

func TestLatest(t *testing.T) {
	l := NewLatest[*metav1.ObjectMeta]()
	if got := l.Of("k", at("5")); got.ResourceVersion != "5" {
		t.Errorf("nothing written: Of = %s, want the cache's 5", got.ResourceVersion)
	}
	l.Wrote("k", at("7"))
	l.Wrote("k", at("6")) // an older answer arriving late does not replace a newer one
	if got := l.Of("k", at("5")); got.ResourceVersion != "7" {
		t.Errorf("cache behind: Of = %s, want the written 7", got.ResourceVersion)
	}
	if got := l.Of("k", at("8")); got.ResourceVersion != "8" {
		t.Errorf("cache ahead: Of = %s, want the cache's 8", got.ResourceVersion)
	}
	if _, ok := l.Get("k"); ok {
		t.Error("the written object is kept after the cache caught up")
	}
	l.Wrote("k", at("x"))
	if got := l.Of("k", at("3")); got.ResourceVersion != "3" {
		t.Errorf("unparsable version: Of = %s, want the cache's", got.ResourceVersion)
	}
	l.Wrote("gone", at("9"))
	l.Forget("gone")
	if _, ok := l.Get("gone"); ok {
		t.Error("Forget kept the object")
	}
}

func TestLatestDeleted(t *testing.T) {
	l := NewLatest[*metav1.ObjectMeta]()
	l.Wrote("k", at("4"))
	l.Deleted("k", "u1")
	if _, ok := l.Get("k"); ok {
		t.Error("Deleted kept the written object")
	}
	if !l.IsGone("k", at("4")) {
		t.Error("IsGone = false for the object the write deleted")
	}
	again := at("4")
	again.UID = types.UID("u2")
	if l.IsGone("k", again) {
		t.Error("IsGone = true for an object created again under the same key")
	}
	l.Forget("k")
	if l.IsGone("k", at("4")) {
		t.Error("IsGone = true after Forget")
	}
}
