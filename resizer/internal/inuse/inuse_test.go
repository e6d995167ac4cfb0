package inuse

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func pod(name string, phase v1.PodPhase, vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"big": "label"}},
		Spec:       v1.PodSpec{Volumes: vols, Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		Status:     v1.PodStatus{Phase: phase, Conditions: []v1.PodCondition{{Type: v1.PodReady}}},
	}
}

func claimVol(claim string) v1.Volume {
	return v1.Volume{Name: "v-" + claim, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func TestUsedAndTrim(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{claimIndex: indexClaims})
	p := &Pods{indexer: idx}
	eph := v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}
	for _, o := range []*v1.Pod{
		pod("running", v1.PodRunning, claimVol("data"), eph),
		pod("done", v1.PodSucceeded, claimVol("old")),
	} {
		trimmed, err := Trim(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := idx.Add(trimmed); err != nil {
			t.Fatal(err)
		}
	}
	for claim, want := range map[string]bool{"data": true, "running-scratch": true, "old": false, "other": false} {
		if got := p.Used("ns", claim); got != want {
			t.Errorf("Used(ns, %s) = %t, want %t", claim, got, want)
		}
	}
	if p.Used("other-ns", "data") {
		t.Error("a claim of the same name in another namespace is reported used")
	}
	obj, _, _ := idx.GetByKey("ns/running")
	trimmed := obj.(*v1.Pod)
	if trimmed.Labels != nil || trimmed.Spec.Containers != nil || trimmed.Status.Conditions != nil || len(trimmed.Spec.Volumes) != 2 {
		t.Errorf("trimmed Pod keeps more than its claims and phase: %+v", trimmed)
	}
}
