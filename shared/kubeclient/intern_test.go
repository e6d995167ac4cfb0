package kubeclient

import (
	"maps"
	"slices"
	"testing"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fresh returns a copy of s in its own allocation, as a decoder hands it out.
func fresh(s string) string { return string([]byte(s)) }

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestInternMetaSharesRepeatedStrings(t *testing.T) {
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Labels:      map[string]string{fresh("topology.kubernetes.io/zone"): fresh("us-east-1a")},
			Annotations: map[string]string{fresh("pv.kubernetes.io/provisioned-by"): fresh("ebs.csi.aws.com"), fresh("handle"): fresh("vol-1")},
			Finalizers:  []string{fresh("kubernetes.io/pv-protection")},
		}
	}
	a, b := meta(), meta()
	want := meta()
	InternMeta(&a)
	InternMeta(&b)
	if !maps.Equal(a.Labels, want.Labels) || !maps.Equal(a.Annotations, want.Annotations) || !slices.Equal(a.Finalizers, want.Finalizers) {
		t.Fatalf("InternMeta changed values: %+v, want %+v", a, want)
	}
	keyOf := func(m map[string]string, k string) string {
		for key := range m {
			if key == k {
				return key
			}
		}
		t.Fatalf("no key %q", k)
		return ""
	}
	for _, tc := range []struct {
		what string
		x, y string
		want bool
	}{
		{"label key", keyOf(a.Labels, "topology.kubernetes.io/zone"), keyOf(b.Labels, "topology.kubernetes.io/zone"), true},
		{"label value", a.Labels["topology.kubernetes.io/zone"], b.Labels["topology.kubernetes.io/zone"], true},
		{"annotation key", keyOf(a.Annotations, "handle"), keyOf(b.Annotations, "handle"), true},
		{"value of a low-cardinality annotation", a.Annotations["pv.kubernetes.io/provisioned-by"], b.Annotations["pv.kubernetes.io/provisioned-by"], true},
		{"value of another annotation", a.Annotations["handle"], b.Annotations["handle"], false},
		{"finalizer", a.Finalizers[0], b.Finalizers[0], true},
	} {
		if got := same(tc.x, tc.y); got != tc.want {
			t.Errorf("%s shared by two objects: %v, want %v", tc.what, got, tc.want)
		}
	}
}

func TestInternKeepsEmptyAndNil(t *testing.T) {
	var m metav1.ObjectMeta
	InternMeta(&m)
	if m.Labels != nil || m.Annotations != nil || m.Finalizers != nil {
		t.Errorf("InternMeta of empty metadata = %+v, want it empty", m)
	}
	if Intern("") != "" {
		t.Error(`Intern("") is not ""`)
	}
}

func TestInternVolumeAndClaimSpecsShareRepeatedStrings(t *testing.T) {
	pv := func() *v1.PersistentVolumeSpec {
		return &v1.PersistentVolumeSpec{
			StorageClassName: fresh("gp3"),
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: fresh("ebs.csi.aws.com"), VolumeHandle: fresh("vol-1"),
			}},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: fresh("topology.kubernetes.io/zone"), Values: []string{fresh("us-east-1a")}}},
			}}}},
		}
	}
	a, b := pv(), pv()
	InternVolumeSpec(a)
	InternVolumeSpec(b)
	if a.CSI.VolumeHandle != "vol-1" || a.StorageClassName != "gp3" {
		t.Fatalf("InternVolumeSpec changed values: %+v", a)
	}
	ea, eb := a.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0], b.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]
	if !same(a.CSI.Driver, b.CSI.Driver) || !same(a.StorageClassName, b.StorageClassName) || !same(ea.Key, eb.Key) || !same(ea.Values[0], eb.Values[0]) {
		t.Error("driver, class or node affinity of two PV specs not shared")
	}
	class := func() *v1.PersistentVolumeClaimSpec {
		c := fresh("gp3")
		return &v1.PersistentVolumeClaimSpec{StorageClassName: &c}
	}
	ca, cb := class(), class()
	InternClaimSpec(ca)
	InternClaimSpec(cb)
	if *ca.StorageClassName != "gp3" || !same(*ca.StorageClassName, *cb.StorageClassName) {
		t.Errorf("class of two claim specs: %q, shared %v; want gp3, shared", *ca.StorageClassName, same(*ca.StorageClassName, *cb.StorageClassName))
	}
}
