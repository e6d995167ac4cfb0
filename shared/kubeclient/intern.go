package kubeclient

import (
	"unique"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Decoding gives every string of every cached object its own allocation, although most of them repeat across
// thousands of objects: annotation and label keys, finalizers, driver, class and node names. An informer
// transform that interns them keeps one copy of each and lets the decoded ones be collected. Interning uses
// the standard library's unique package, whose table drops a string once no object holds it.

// lowCardinality reports annotation keys whose values repeat across objects (a driver, a node, a flag), so
// their values are interned too. Other values (volume handles, last-applied-configuration) are mostly unique,
// and an entry in the intern table would cost more than it saves.
func lowCardinality(key string) bool {
	switch key {
	case "pv.kubernetes.io/bind-completed", "pv.kubernetes.io/bound-by-controller", "pv.kubernetes.io/provisioned-by",
		"pv.kubernetes.io/migrated-to", "volume.kubernetes.io/storage-provisioner",
		"volume.beta.kubernetes.io/storage-provisioner", "volume.kubernetes.io/selected-node",
		"csi.alpha.kubernetes.io/node-id":
		return true
	}
	return false
}

// Intern returns the canonical copy of s.
func Intern[S ~string](s S) S {
	if s == "" {
		return s
	}
	return S(unique.Make(string(s)).Value())
}

// InternAll interns each element of ss in place.
func InternAll[S ~string](ss []S) {
	for i, s := range ss {
		ss[i] = Intern(s)
	}
}

// InternKeys returns m with its keys interned, and its values too when values says so for the key. The map
// is rebuilt (a key cannot be replaced in place), so callers store the result.
func InternKeys[K ~string, V any](m map[K]V, values func(K, V) V) map[K]V {
	if len(m) == 0 {
		return m
	}
	out := make(map[K]V, len(m))
	for k, v := range m {
		if values != nil {
			v = values(k, v)
		}
		out[Intern(k)] = v
	}
	return out
}

// InternMeta interns what repeats in an object's metadata: label keys and values, annotation keys and the
// values of the annotations in lowCardinality, and finalizers.
func InternMeta(m *metav1.ObjectMeta) {
	m.Labels = InternKeys(m.Labels, func(_, v string) string { return Intern(v) })
	m.Annotations = InternKeys(m.Annotations, func(k, v string) string {
		if lowCardinality(k) {
			return Intern(v)
		}
		return v
	})
	InternAll(m.Finalizers)
}

// InternVolumeSpec interns what repeats across PersistentVolumes in spec: access modes, mount options, volume
// mode, class, reclaim policy, the claim reference's kind, version and namespace, the CSI source's driver, fsType
// and attributes, and the node affinity's keys, operators and values.
func InternVolumeSpec(spec *v1.PersistentVolumeSpec) {
	InternAll(spec.AccessModes)
	InternAll(spec.MountOptions)
	internPtr(spec.VolumeMode)
	spec.StorageClassName = Intern(spec.StorageClassName)
	spec.PersistentVolumeReclaimPolicy = Intern(spec.PersistentVolumeReclaimPolicy)
	if ref := spec.ClaimRef; ref != nil {
		ref.Kind, ref.APIVersion, ref.Namespace = Intern(ref.Kind), Intern(ref.APIVersion), Intern(ref.Namespace)
	}
	if src := spec.CSI; src != nil {
		src.Driver, src.FSType = Intern(src.Driver), Intern(src.FSType)
		src.VolumeAttributes = InternKeys(src.VolumeAttributes, func(_, v string) string { return Intern(v) })
	}
	if na := spec.NodeAffinity; na != nil && na.Required != nil {
		for i := range na.Required.NodeSelectorTerms {
			for j := range na.Required.NodeSelectorTerms[i].MatchExpressions {
				e := &na.Required.NodeSelectorTerms[i].MatchExpressions[j]
				e.Key, e.Operator = Intern(e.Key), Intern(e.Operator)
				InternAll(e.Values)
			}
		}
	}
}

// InternClaimSpec interns what repeats across claims in spec: access modes, class, volume mode, attributes class
// and the resource names of the requests.
func InternClaimSpec(spec *v1.PersistentVolumeClaimSpec) {
	InternAll(spec.AccessModes)
	internPtr(spec.StorageClassName)
	internPtr(spec.VolumeMode)
	internPtr(spec.VolumeAttributesClassName)
	spec.Resources.Requests = InternKeys(spec.Resources.Requests, nil)
}

// internPtr interns the string p points to, if any.
func internPtr[S ~string](p *S) {
	if p != nil {
		*p = Intern(*p)
	}
}
