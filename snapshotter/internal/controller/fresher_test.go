package controller

import (
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func vsAt(rv string) *snapv1.VolumeSnapshot {
	return &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "s", ResourceVersion: rv}}
}

func TestFresher(t *testing.T) {
	f := newFresher[*snapv1.VolumeSnapshot]()
	if got := f.latest("k", vsAt("5")); got.ResourceVersion != "5" {
		t.Errorf("nothing written: latest = %s, want the cache's 5", got.ResourceVersion)
	}
	f.wrote("k", vsAt("7"))
	f.wrote("k", vsAt("6")) // an older answer arriving late does not replace a newer one
	if got := f.latest("k", vsAt("5")); got.ResourceVersion != "7" {
		t.Errorf("cache behind: latest = %s, want the written 7", got.ResourceVersion)
	}
	if got := f.latest("k", vsAt("8")); got.ResourceVersion != "8" {
		t.Errorf("cache ahead: latest = %s, want the cache's 8", got.ResourceVersion)
	}
	if _, ok := f.get("k"); ok {
		t.Error("the written object is kept after the cache caught up")
	}
	f.wrote("k", vsAt("x"))
	if got := f.latest("k", vsAt("3")); got.ResourceVersion != "3" {
		t.Errorf("unparsable version: latest = %s, want the cache's", got.ResourceVersion)
	}
	f.wrote("gone", vsAt("9"))
	f.forget("gone")
	if _, ok := f.get("gone"); ok {
		t.Error("forget kept the object")
	}
}
